package httpaction

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/resched/resched/shared/job"
)

// redacted stands in the history for a secret the target sent back.
const redacted = "REDACTED"

// minRedacted is the shortest secret looked for in an answer: a shorter one would blank out
// ordinary text all over the message, and is no credential worth the name.
const minRedacted = 4

// sentSecrets are the secrets the request carries, as the target receives them, so that an
// answer that echoes them (an echo service, a debugging endpoint, an error page quoting the
// request) does not put them in the history, which readers of the job see. They are the
// values of the secret headers (job.SecretHeaders, with the credentials of an Authorization
// without its scheme: a Basic pair in base64, an OAuth token; and each cookie's value), the
// Basic password, and the values of the secret query parameters (job.SecretQueryParameters),
// as written and decoded. Longest first, so that a value holding another is masked whole.
func sentSecrets(req *http.Request, password string) []string {
	var out []string
	add := func(v string) {
		if len(v) >= minRedacted && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	add(password) // a target may show the Basic credentials decoded
	for name, values := range req.Header {
		if !job.IsSecretMember("headers", name) {
			continue
		}
		for _, v := range values {
			add(v)
			if strings.EqualFold(name, "Cookie") { // each cookie's value, as a target lists them
				for _, c := range strings.Split(v, ";") {
					_, value, _ := strings.Cut(c, "=")
					add(strings.TrimSpace(value))
				}
			} else if _, credentials, ok := strings.Cut(v, " "); ok {
				add(strings.TrimSpace(credentials))
			}
		}
	}
	for q := req.URL.RawQuery; q != ""; { // cut, not split: no allocation per delivery
		var p string
		p, q, _ = strings.Cut(q, "&")
		name, v, ok := strings.Cut(p, "=")
		if !ok || !job.IsSecretMember("query", name) {
			continue
		}
		add(v)
		if d, err := url.QueryUnescape(v); err == nil {
			add(d)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// redactString masks every secret in s.
func redactString(s string, secrets []string) string {
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, redacted)
	}
	return s
}

// redactPrefix masks every secret in b and keeps what stood in its first limit bytes, at
// most limit bytes: b is read past limit by the longest secret, so one that starts before
// limit is masked whole rather than cut into a prefix that shows.
func redactPrefix(b []byte, secrets []string, limit int) []byte {
	if len(secrets) == 0 {
		return b[:min(len(b), limit)]
	}
	var out []byte
	for i := 0; i < len(b) && i < limit; {
		at, which := -1, ""
		for _, v := range secrets { // longest first: at a tie the longer one wins
			if j := bytes.Index(b[i:], []byte(v)); j >= 0 && (at < 0 || j < at) {
				at, which = j, v
			}
		}
		if at < 0 || i+at >= limit {
			out = append(out, b[i:min(len(b), limit)]...)
			break
		}
		out = append(append(out, b[i:i+at]...), redacted...)
		i += at + len(which)
	}
	return out[:min(len(out), limit)] // a mask longer than its secret may cross the limit
}
