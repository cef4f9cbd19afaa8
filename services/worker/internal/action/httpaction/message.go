package httpaction

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// maxBodyInMessage is what history keeps of a response body (reference, section 6.8).
	maxBodyInMessage = 2048
	// maxBodyDrained is read past the kept part so the connection can be reused; a longer
	// body closes the connection instead.
	maxBodyDrained = 64 << 10
)

// summarise reads the answer into the original history message and closes its body:
//
//	Http Action - Response from host '<host>': '<reason>' Response Headers: <Name>: <value>\r\n… Body: <first 2,048 bytes>
//
// with every one of secrets the answer holds masked (sentSecrets).
func summarise(host string, resp *http.Response, secrets []string) string {
	defer resp.Body.Close()
	longest := 0
	if len(secrets) > 0 {
		longest = len(secrets[0])
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, int64(maxBodyInMessage+longest)))
	body = redactPrefix(body, secrets, maxBodyInMessage)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyDrained))

	var b strings.Builder
	b.WriteString("Http Action - Response from host '")
	b.WriteString(host)
	b.WriteString("': '")
	b.WriteString(redactString(statusText(resp), secrets))
	b.WriteString("' Response Headers: ")
	names := make([]string, 0, len(resp.Header))
	for name := range resp.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(redactString(strings.Join(resp.Header[name], ", "), secrets))
		b.WriteString("\r\n")
	}
	b.WriteString(" Body: ")
	b.WriteString(validUTF8Prefix(body))
	return b.String()
}

// statusText is the reason phrase of the answer ("OK"), or its code when it has none.
func statusText(resp *http.Response) string {
	code := strconv.Itoa(resp.StatusCode)
	if reason := strings.TrimSpace(strings.TrimPrefix(resp.Status, code)); reason != "" {
		return reason
	}
	if reason := http.StatusText(resp.StatusCode); reason != "" {
		return reason
	}
	return code
}

// validUTF8Prefix drops a rune cut in half by the 2,048-byte limit and replaces bytes that are
// not UTF-8 (a binary body), so the message stays text.
func validUTF8Prefix(b []byte) string {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
