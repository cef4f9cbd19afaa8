package httpaction

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A secret that the excerpt's cut goes through is masked whole, not kept in part; what stood
// after the cut is not brought in by a mask shorter than its secret.
func TestRedactPrefixAtTheCut(t *testing.T) {
	secrets := []string{"a-long-secret-value-0123456789", "short-key"}
	for _, tc := range []struct {
		in, want string
	}{
		{strings.Repeat(".", 6) + secrets[0] + "tail", "......REDA"}, // the cut (10) inside the secret
		{"..short-key..", "..REDACTED"},                              // before the cut, then the cut
		{"......" + "short-k", "......shor"},                         // not the whole secret: nothing to mask
		{secrets[0] + secrets[1], "REDACTED"},                        // the second stood after the cut: left out, though the mask is shorter
		{"...........after", ".........."},
		{"........short-key", "........RE"}, // a mask is cut at the limit too
	} {
		got := string(redactPrefix([]byte(tc.in), secrets, 10))
		if got != tc.want {
			t.Errorf("redactPrefix(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A reason phrase that quotes a secret is masked too: it is in the history and in the error.
func TestSummariseMasksTheReasonPhrase(t *testing.T) {
	resp := &http.Response{Status: "401 bad key key-0123456789", StatusCode: 401, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("no"))}
	msg := summarise("h", resp, []string{"key-0123456789"})
	if strings.Contains(msg, "key-0123456789") || !strings.Contains(msg, "'bad key REDACTED'") {
		t.Errorf("message %q", msg)
	}
}
