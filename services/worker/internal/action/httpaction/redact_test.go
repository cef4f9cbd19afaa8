package httpaction_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/shared/job"
)

// echoTarget answers with what it received, as echo services and debugging endpoints do: the
// request's headers and query in its body, and its Authorization in a header. pad puts that
// many bytes before the echo, to move it to the 2,048-byte cut of the history's excerpt.
func echoTarget(t *testing.T, pad int) string {
	return newTargetFunc(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, strings.Repeat(".", pad))
		for name, values := range r.Header {
			_, _ = fmt.Fprintf(w, "%s: %s\n", name, strings.Join(values, ", "))
		}
		_, _ = fmt.Fprintf(w, "query: %s\ndecoded: %v\n", r.URL.RawQuery, r.URL.Query())
		for _, c := range r.Cookies() {
			_, _ = fmt.Fprintf(w, "cookie %s is %s\n", c.Name, c.Value)
		}
	})
}

// A target that sends the request's credentials back does not put them in the history: the
// readers of a job's history are not all allowed to see its secrets.
func TestSecretsEchoedByTheTargetAreNotKept(t *testing.T) {
	d := httpaction.New(httpaction.Options{})
	secrets := []string{"b4sic-pw-1", "api-key-2", "func/code+3=", "session=cookie-4; theme=cookie-5"}
	for _, pad := range []int{0, 1900, 2000, 2040} { // the cut falls before, inside and after the secrets
		t.Run(fmt.Sprint("padding ", pad), func(t *testing.T) {
			a := withAuth(httpAction(echoTarget(t, pad)+"/hook?code="+url.QueryEscape(secrets[2])+"&plain=1", "GET"),
				&job.HTTPAuthentication{Type: job.AuthBasic, Username: "alice", Password: secrets[0]})
			a.Request.Headers = map[string]string{"x-api-key": secrets[1], "Cookie": secrets[3], "X-Other": "kept-as-is"}
			msg, err := d.Deliver(context.Background(), a, testMeta())
			if err != nil {
				t.Fatal(err)
			}
			basic := "YWxpY2U6YjRzaWMtcHctMQ==" // alice:b4sic-pw-1
			for _, s := range append(secrets, basic, url.QueryEscape(secrets[2]), "cookie-4", "cookie-5") {
				if strings.Contains(msg, s) {
					t.Errorf("the history's message holds %q:\n%s", s, msg)
				}
			}
			if pad == 0 && (!strings.Contains(msg, "X-Echo-Authorization: REDACTED") || !strings.Contains(msg, "X-Other: kept-as-is") ||
				!strings.Contains(msg, "plain=1")) {
				t.Errorf("the message does not keep what is not secret, or masks nothing:\n%s", msg)
			}
			if body := msg[strings.Index(msg, " Body: ")+len(" Body: "):]; len(body) > 2048 {
				t.Errorf("the body's excerpt is %d bytes, more than 2,048", len(body))
			}
		})
	}
}

// An OAuth token is the target's to see, not the history's.
func TestAnEchoedOAuthTokenIsNotKept(t *testing.T) {
	te := newTokenEndpoint(t, 3600)
	d := httpaction.New(httpaction.Options{OAuthAuthority: te.URL + "/"})
	msg, err := d.Deliver(context.Background(), oauthAction(echoTarget(t, 0)), testMeta())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(msg, "token-1") || !strings.Contains(msg, "Authorization: REDACTED") {
		t.Errorf("the history's message:\n%s", msg)
	}
}

// An identity provider that quotes the token request in its refusal does not put the client
// secret in the history.
func TestAClientSecretQuotedByTheIdentityProviderIsNotKept(t *testing.T) {
	authority := newTargetFunc(t, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, `{"error": "invalid_client", "error_description": "secret %s is not valid"}`, r.PostForm.Get("client_secret"))
	})
	d := httpaction.New(httpaction.Options{OAuthAuthority: authority})
	msg, err := d.Deliver(context.Background(), oauthAction(echoTarget(t, 0)), testMeta())
	if err == nil || strings.Contains(msg, "the-secret") || !strings.Contains(msg, "secret REDACTED is not valid") {
		t.Errorf("the history's message (%v):\n%s", err, msg)
	}
}
