package httpaction_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/shared/job"
)

func TestBasicAuthentication(t *testing.T) {
	tg := newTarget(t, 0)
	a := withAuth(httpAction(tg.URL, "GET"), &job.HTTPAuthentication{Type: job.AuthBasic, Username: "alice", Password: "b4sic-pw"})
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), a, testMeta())
	if err != nil {
		t.Fatal(err)
	}
	r := tg.requests()[0]
	req := http.Request{Header: r.Header}
	if user, pw, ok := req.BasicAuth(); !ok || user != "alice" || pw != "b4sic-pw" {
		t.Errorf("target got basic auth %q/%q (%v)", user, pw, ok)
	}
	if strings.Contains(msg, "b4sic-pw") || strings.Contains(msg, "Authorization") {
		t.Errorf("message %q holds the credentials", msg)
	}
}

func TestClientCertificateAuthentication(t *testing.T) {
	cc := newClientCert(t, "job-client", "pfx-pw")
	tg := mtlsTarget(t, cc.cert)
	d := httpaction.New(httpaction.Options{RootCAs: serverPool(tg.Server)})
	a := withAuth(httpAction(tg.URL+"/secure", "GET"), &job.HTTPAuthentication{Type: job.AuthClientCertificate, Pfx: cc.pfx, Password: cc.password})
	for i := range 2 { // the second delivery takes the cached certificate
		if _, err := d.Deliver(context.Background(), a, testMeta()); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	for _, r := range tg.requests() {
		if r.ClientCertSubject != "job-client" {
			t.Errorf("target saw client certificate %q, want job-client", r.ClientCertSubject)
		}
	}

	// Without the certificate the same target refuses the handshake: a retryable failure.
	_, err := d.Deliver(context.Background(), httpAction(tg.URL+"/secure", "GET"), testMeta())
	if err == nil || action.IsPermanent(err) {
		t.Errorf("Deliver without a certificate: %v, want a retryable failure", err)
	}
	// Another certificate is not trusted by the target.
	other := newClientCert(t, "intruder", "pw")
	_, err = d.Deliver(context.Background(), withAuth(httpAction(tg.URL, "GET"), &job.HTTPAuthentication{Type: job.AuthClientCertificate, Pfx: other.pfx, Password: other.password}), testMeta())
	if err == nil {
		t.Error("Deliver with an untrusted certificate succeeded")
	}
}

// tokenEndpoint is a fake Azure AD v1 token endpoint.
type tokenEndpoint struct {
	*httptest.Server
	calls     atomic.Int32
	expiresIn int
	refuse    bool
	mu        sync.Mutex
	forms     []map[string]string
	paths     []string
}

func newTokenEndpoint(t *testing.T, expiresIn int) *tokenEndpoint {
	te := &tokenEndpoint{expiresIn: expiresIn}
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := te.calls.Add(1)
		_ = r.ParseForm()
		form := map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		te.mu.Lock()
		te.forms = append(te.forms, form)
		te.paths = append(te.paths, r.Method+" "+r.URL.Path)
		te.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if te.refuse || form["client_secret"] != "the-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided.\r\nTrace ID: 1"})
			return
		}
		// v1 answers with numbers as strings.
		_ = json.NewEncoder(w).Encode(map[string]string{
			"token_type": "Bearer", "expires_in": strconv.Itoa(te.expiresIn), "access_token": "token-" + strconv.Itoa(int(n)),
		})
	}))
	t.Cleanup(te.Close)
	return te
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func oauthAction(uri string) *job.ActionSpec {
	return withAuth(httpAction(uri, "GET"), &job.HTTPAuthentication{
		Type: job.AuthActiveDirectoryOAuth, Tenant: "contoso.onmicrosoft.com", Audience: "https://management.core.windows.net/",
		ClientID: "client-1", Secret: "the-secret",
	})
}

func TestActiveDirectoryOAuthFetchesAndCachesTokens(t *testing.T) {
	te := newTokenEndpoint(t, 3600)
	tg := newTarget(t, 0)
	clk := &clock{now: time.Now()}
	d := httpaction.New(httpaction.Options{OAuthAuthority: te.URL + "/", Clock: clk.Now})

	// Concurrent deliveries with the same credentials share one token request.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := d.Deliver(context.Background(), oauthAction(tg.URL), testMeta()); err != nil {
				t.Errorf("Deliver: %v", err)
			}
		})
	}
	wg.Wait()
	if n := te.calls.Load(); n != 1 {
		t.Fatalf("token endpoint called %d times, want 1", n)
	}
	te.mu.Lock()
	form, path := te.forms[0], te.paths[0]
	te.mu.Unlock()
	if path != "POST /contoso.onmicrosoft.com/oauth2/token" {
		t.Errorf("token request %s", path)
	}
	want := map[string]string{"grant_type": "client_credentials", "client_id": "client-1", "client_secret": "the-secret", "resource": "https://management.core.windows.net/"}
	for k, v := range want {
		if form[k] != v {
			t.Errorf("token form %s = %q, want %q", k, form[k], v)
		}
	}
	for _, r := range tg.requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer token-1" {
			t.Errorf("target got Authorization %q, want Bearer token-1", got)
		}
	}

	// Shortly before expiry a new token is fetched.
	clk.Add(56 * time.Minute)
	if _, err := d.Deliver(context.Background(), oauthAction(tg.URL), testMeta()); err != nil {
		t.Fatal(err)
	}
	reqs := tg.requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer token-2" || te.calls.Load() != 2 {
		t.Errorf("after 56 minutes: Authorization %q after %d token requests, want Bearer token-2 after 2", got, te.calls.Load())
	}

	// Other credentials get their own token.
	a := oauthAction(tg.URL)
	a.Request.Authentication.ClientID = "client-2"
	if _, err := d.Deliver(context.Background(), a, testMeta()); err != nil {
		t.Fatal(err)
	}
	if n := te.calls.Load(); n != 3 {
		t.Errorf("token endpoint called %d times, want 3", n)
	}
}

func TestActiveDirectoryOAuthRefusedIsRetryable(t *testing.T) {
	te := newTokenEndpoint(t, 3600)
	tg := newTarget(t, 0)
	d := httpaction.New(httpaction.Options{OAuthAuthority: te.URL})
	a := oauthAction(tg.URL)
	a.Request.Authentication.Secret = "a-wrong-secret"
	msg, err := d.Deliver(context.Background(), a, testMeta())
	if err == nil || action.IsPermanent(err) {
		t.Fatalf("Deliver: %v, want a retryable failure", err)
	}
	if !strings.Contains(msg, "invalid_client") || !strings.Contains(msg, "AADSTS7000215") || strings.Contains(msg, "Trace ID") {
		t.Errorf("message %q should name the refusal on one line", msg)
	}
	if strings.Contains(msg, "a-wrong-secret") || strings.Contains(err.Error(), "a-wrong-secret") {
		t.Errorf("message %q holds the secret", msg)
	}
	if len(tg.requests()) != 0 {
		t.Error("the target was called without a token")
	}
	// The right secret is not served the failure, nor the wrong one a token.
	if _, err := d.Deliver(context.Background(), oauthAction(tg.URL), testMeta()); err != nil {
		t.Fatalf("Deliver with the right secret: %v", err)
	}
	if _, err := d.Deliver(context.Background(), a, testMeta()); err == nil {
		t.Error("the wrong secret rode on the right secret's token")
	}
}
