package httpaction_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/tlstest"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/actiontest"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/shared/job"
)

func httpAction(uri, method string) *job.ActionSpec {
	return &job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: uri, Method: method}}
}

func TestDeliverSendsTheRequestAndTheSchedulerHeaders(t *testing.T) {
	tg := newTarget(t, http.StatusCreated)
	a := httpAction(tg.URL+"/hook/x?a=1&b=2", "post")
	a.Request.Headers = map[string]string{
		"Content-Type": "application/json", "X-Custom": "v1",
		"x-ms-scheduler-jobid": "spoofed", // the scheduler's headers win
	}
	a.Request.Body = `{"hello":"world"}`
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), a, testMeta())
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	reqs := tg.requests()
	if len(reqs) != 1 {
		t.Fatalf("target got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/hook/x" || r.Query != "a=1&b=2" || r.Body != `{"hello":"world"}` {
		t.Errorf("target got %s %s?%s %q", r.Method, r.Path, r.Query, r.Body)
	}
	want := map[string]string{
		"Content-Type":                           "application/json",
		"X-Custom":                               "v1",
		"x-ms-scheduler-jobid":                   "job_1",
		"x-ms-scheduler-jobcollectionid":         "coll-1",
		"x-ms-scheduler-expected-execution-time": "2026-03-01T11:30:00Z",
		"x-ms-scheduler-execution-tag":           "0123456789abcdef0123456789abcdef",
		"x-ms-client-request-id":                 "3c4b84e2-aee5-43ac-913e-c05c8827ac41",
		"User-Agent":                             "resched-worker",
	}
	for name, v := range want {
		if got := r.Header.Values(name); len(got) != 1 || got[0] != v {
			t.Errorf("header %s = %q, want %q", name, got, v)
		}
	}
	if r.Header.Get("Authorization") != "" {
		t.Errorf("unauthenticated action sent Authorization %q", r.Header.Get("Authorization"))
	}
	prefix := "Http Action - Response from host '127.0.0.1': 'Created' Response Headers: "
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("message %q does not start with %q", msg, prefix)
	}
	for _, part := range []string{"Content-Type: text/plain\r\n", "X-Target: yes\r\n", "\r\n Body: hello from the target"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %q", msg, part)
		}
	}
}

func TestDeliverHostHeaderAndDefaultMethod(t *testing.T) {
	tg := newTarget(t, 0)
	a := httpAction(tg.URL, "")
	a.Request.Headers = map[string]string{"Host": "example.test"}
	if _, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), a, testMeta()); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if r := tg.requests()[0]; r.Method != "GET" || r.Host != "example.test" {
		t.Errorf("target got %s with Host %q, want GET with Host example.test", r.Method, r.Host)
	}
}

// The request goes to the URI as given: escapes in the path and the query kept.
func TestDeliverKeepsTheURIAsGiven(t *testing.T) {
	tg := newTarget(t, 0)
	for _, path := range []string{"/a%2Fb/c%20d?x=%20y&z", "/", "/%E2%82%AC/x?q=%E2%82%AC"} {
		if _, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), httpAction(tg.URL+path, "GET"), testMeta()); err != nil {
			t.Fatalf("Deliver %s: %v", path, err)
		}
		reqs := tg.requests()
		if r := reqs[len(reqs)-1]; r.RequestURI != path || r.Host != strings.TrimPrefix(tg.URL, "http://") {
			t.Errorf("sent %s to host %s, want %s to %s", r.RequestURI, r.Host, path, tg.URL)
		}
	}
}

func TestDeliverStatuses(t *testing.T) {
	tests := []struct {
		status int
		ok     bool
		reason string
	}{
		{200, true, "'OK'"},
		{204, true, "'No Content'"},
		{299, true, "'status code 299'"},    // the reason phrase the (Go) target sent
		{301, false, "'Moved Permanently'"}, // no Location: not followed
		{404, false, "'Not Found'"},
		{500, false, "'Internal Server Error'"},
		{503, false, "'Service Unavailable'"},
	}
	d := httpaction.New(httpaction.Options{})
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			tg := newTarget(t, tt.status)
			msg, err := d.Deliver(context.Background(), httpAction(tg.URL, "GET"), testMeta())
			if tt.ok != (err == nil) {
				t.Fatalf("Deliver: err = %v, want success %v", err, tt.ok)
			}
			if action.IsPermanent(err) {
				t.Errorf("status %d is a permanent failure, want retryable", tt.status)
			}
			if !strings.Contains(msg, "Response from host '127.0.0.1': "+tt.reason) {
				t.Errorf("message %q lacks the reason %s", msg, tt.reason)
			}
		})
	}
}

func TestDeliverKeepsTheFirst2048BytesOfTheBody(t *testing.T) {
	body := strings.Repeat("é", 1500) // 3,000 bytes: the cut falls inside a rune
	srv := newTargetFunc(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) })
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), httpAction(srv, "GET"), testMeta())
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := strings.Cut(msg, " Body: ")
	if want := strings.Repeat("é", 1024); got != want {
		t.Errorf("message body has %d bytes, want the 2,048 bytes of 1,024 whole runes", len(got))
	}
}

func TestDeliverTimeout(t *testing.T) {
	url, _ := hangingTarget(t)
	d := httpaction.New(httpaction.Options{Timeout: 200 * time.Millisecond})
	msg, err := d.Deliver(context.Background(), httpAction(url, "GET"), testMeta())
	if err == nil || action.IsPermanent(err) {
		t.Fatalf("Deliver: %v, want a retryable time-out", err)
	}
	if want := "Http Action - Request to host '127.0.0.1' failed: timed out"; !strings.HasPrefix(msg, want) {
		t.Errorf("message %q does not start with %q", msg, want)
	}
}

func TestDeliverTransportErrorLeavesTheURIOut(t *testing.T) {
	tg := newTarget(t, 0)
	url := tg.URL + "/x?sig=s3cr3t"
	tg.Close() // nothing listens any more
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), httpAction(url, "GET"), testMeta())
	if err == nil || action.IsPermanent(err) {
		t.Fatalf("Deliver: %v, want a retryable failure", err)
	}
	if strings.Contains(msg, "s3cr3t") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("message %q or error %q holds the query", msg, err)
	}
	if !strings.HasPrefix(msg, "Http Action - Request to host '127.0.0.1' failed: ") {
		t.Errorf("message %q", msg)
	}
}

func TestDeliverPermanentFailures(t *testing.T) {
	tests := []struct {
		name string
		a    *job.ActionSpec
	}{
		{"no request", &job.ActionSpec{Type: job.ActionHTTP}},
		{"scheme", httpAction("ftp://example.test/x", "GET")},
		{"no host", httpAction("http:///x", "GET")},
		{"not a URI", httpAction("http://a b/%zz", "GET")},
		{"method", httpAction("http://127.0.0.1:1/", "GE T")},
		{"header name", withHeader(httpAction("http://127.0.0.1:1/", "GET"), "Bad Name", "v")},
		{"header value", withHeader(httpAction("http://127.0.0.1:1/", "GET"), "X", "a\r\nInjected: 1")},
		{"auth type", withAuth(httpAction("http://127.0.0.1:1/", "GET"), &job.HTTPAuthentication{Type: "Kerberos"})},
		{"pfx not base64", withAuth(httpAction("https://127.0.0.1:1/", "GET"), &job.HTTPAuthentication{Type: job.AuthClientCertificate, Pfx: "!!", Password: "pw"})},
		{"pfx not PKCS 12", withAuth(httpAction("https://127.0.0.1:1/", "GET"), &job.HTTPAuthentication{Type: job.AuthClientCertificate, Pfx: "aGVsbG8=", Password: "pw"})},
		// Stored by an earlier release, which did not bound the file's key derivation.
		{"pfx asking too much work", withAuth(httpAction("https://127.0.0.1:1/", "GET"), &job.HTTPAuthentication{Type: job.AuthClientCertificate, Pfx: tlstest.PFXWithIterations(t, "pw", 400_000), Password: "pw"})},
		{"oauth without secret", withAuth(httpAction("https://127.0.0.1:1/", "GET"), &job.HTTPAuthentication{Type: job.AuthActiveDirectoryOAuth, Tenant: "t", ClientID: "c", Audience: "a"})},
	}
	d := httpaction.New(httpaction.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := d.Deliver(context.Background(), tt.a, testMeta())
			if !action.IsPermanent(err) {
				t.Fatalf("Deliver: %v (message %q), want a permanent failure", err, msg)
			}
		})
	}
}

func TestDeliverWrongPFXPasswordIsPermanent(t *testing.T) {
	cc := newClientCert(t, "job-client", "right-password")
	a := withAuth(httpAction("https://127.0.0.1:1/", "GET"), &job.HTTPAuthentication{Type: job.AuthClientCertificate, Pfx: cc.pfx, Password: "wrong-password"})
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), a, testMeta())
	if !action.IsPermanent(err) {
		t.Fatalf("Deliver: %v, want a permanent failure", err)
	}
	for _, s := range []string{"right-password", "wrong-password", cc.pfx[:20]} {
		if strings.Contains(msg, s) || strings.Contains(err.Error(), s) {
			t.Errorf("message %q or error %q holds a secret", msg, err)
		}
	}
}

func TestConformance(t *testing.T) {
	tg := newTarget(t, 0)
	failing := newTarget(t, http.StatusServiceUnavailable)
	cc := newClientCert(t, "conformance", "pfx-password")
	actiontest.Run(t, actiontest.Harness{
		Deliverer: httpaction.New(httpaction.Options{}),
		Success: func(t *testing.T) (*job.ActionSpec, actiontest.Check) {
			a := withAuth(httpAction(tg.URL+"/ok", "POST"), &job.HTTPAuthentication{Type: job.AuthBasic, Username: "u", Password: "basic-password"})
			return a, func(t *testing.T, m action.Meta) {
				for _, r := range tg.requests() {
					if r.Header.Get(httpaction.HeaderExecutionTag) == m.ExecutionTag && r.Header.Get(httpaction.HeaderClientRequestID) == m.ClientRequestID {
						return
					}
				}
				t.Errorf("target did not receive execution tag %s", m.ExecutionTag)
			}
		},
		RetryableFailure: func(*testing.T) *job.ActionSpec { return httpAction(failing.URL, "GET") },
		PermanentFailure: func(*testing.T) *job.ActionSpec {
			return withAuth(httpAction("https://127.0.0.1:1/", "GET"), &job.HTTPAuthentication{Type: job.AuthClientCertificate, Pfx: cc.pfx, Password: "not-the-pfx-password"})
		},
		Hang: func(t *testing.T) (*job.ActionSpec, <-chan struct{}) {
			url, held := hangingTarget(t)
			return httpAction(url, "GET"), held
		},
		Secrets: []string{"basic-password", "pfx-password", "not-the-pfx-password"},
	})
}

func withHeader(a *job.ActionSpec, name, value string) *job.ActionSpec {
	a.Request.Headers = map[string]string{name: value}
	return a
}

func withAuth(a *job.ActionSpec, auth *job.HTTPAuthentication) *job.ActionSpec {
	a.Request.Authentication = auth
	return a
}

func newTargetFunc(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A target whose certificate no trusted CA signed fails with the way out named: the workers'
// setting for a private CA.
func TestAnUnknownCASaysWhereToTrustIt(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	t.Cleanup(srv.Close)
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), httpAction(srv.URL, "GET"), testMeta())
	if err == nil || !strings.Contains(msg, "certificate signed by unknown authority") || !strings.Contains(msg, "RESCHED_WORKER_TARGET_CA") {
		t.Errorf("the history's message (%v): %s", err, msg)
	}
	// Trusted, the same target is delivered.
	if _, err := httpaction.New(httpaction.Options{RootCAs: serverPool(srv)}).Deliver(context.Background(), httpAction(srv.URL, "GET"), testMeta()); err != nil {
		t.Errorf("with its CA trusted: %v", err)
	}
}
