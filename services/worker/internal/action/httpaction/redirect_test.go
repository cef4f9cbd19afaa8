package httpaction_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/shared/job"
)

// secretAction is an action to uri with every secret header, Basic authentication and one
// header that is not a secret.
func secretAction(uri string) *job.ActionSpec {
	a := httpAction(uri, "POST")
	a.Request.Body = "payload"
	a.Request.Headers = map[string]string{"X-Custom": "kept"}
	for _, name := range job.SecretHeaders {
		if name != "Authorization" { // Basic authentication sets it
			a.Request.Headers[name] = "secret-of-" + name
		}
	}
	a.Request.Authentication = &job.HTTPAuthentication{Type: job.AuthBasic, Username: "u", Password: "basic-pw"}
	return a
}

// redirector answers every request with a 307 to to(r) (a 307 keeps the method and body).
func redirector(t *testing.T, to func(r *http.Request) string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to(r), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func checkNoSecret(t *testing.T, r received) {
	t.Helper()
	for _, name := range job.SecretHeaders {
		if v := r.Header.Get(name); v != "" {
			t.Errorf("%s %s received %s: %q", r.Method, r.Path, name, v)
		}
	}
	if v := r.Header.Get("Referer"); v != "" {
		t.Errorf("%s received Referer %q", r.Path, v)
	}
}

func TestARedirectToAnotherOriginCarriesNoSecret(t *testing.T) {
	other := newTarget(t, 0) // another port of the same host: another origin
	from := redirector(t, func(*http.Request) string { return other.URL + "/elsewhere" })
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), secretAction(from.URL+"/start?code=fn-code"), testMeta())
	if err != nil {
		t.Fatalf("Deliver: %v (%s)", err, msg)
	}
	reqs := other.requests()
	if len(reqs) != 1 {
		t.Fatalf("the other origin got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	checkNoSecret(t, r)
	if r.Header.Get("X-Custom") != "kept" || r.Header.Get("x-ms-scheduler-jobid") != "job_1" || r.Body != "payload" {
		t.Errorf("the other origin lost what is not a secret: %v %q", r.Header, r.Body)
	}
}

func TestARedirectWithinTheOriginKeepsTheSecrets(t *testing.T) {
	tg := newTarget(t, 0)
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/landed", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/landed", tg.serve)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), secretAction(srv.URL+"/start"), testMeta()); err != nil {
		t.Fatalf("Deliver: %v (%s)", err, msg)
	}
	r := tg.requests()[0]
	if r.Header.Get("X-Functions-Key") != "secret-of-X-Functions-Key" || r.Header.Get("X-Api-Key") != "secret-of-X-Api-Key" {
		t.Errorf("the same origin lost the keys: %v", r.Header)
	}
	if u, pw, ok := (&http.Request{Header: r.Header}).BasicAuth(); !ok || u != "u" || pw != "basic-pw" {
		t.Errorf("the same origin lost Basic authentication: %v", r.Header)
	}
	if v := r.Header.Get("Referer"); v != "" {
		t.Errorf("Referer %q", v)
	}
}

func TestASecretNotSentOnceAHopLeftTheOrigin(t *testing.T) {
	tg := newTarget(t, 0)
	var home *httptest.Server
	away := redirector(t, func(*http.Request) string { return home.URL + "/back" })
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, away.URL+"/away", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/back", tg.serve)
	home = httptest.NewServer(mux)
	t.Cleanup(home.Close)
	if msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), secretAction(home.URL+"/start"), testMeta()); err != nil {
		t.Fatalf("Deliver: %v (%s)", err, msg)
	}
	checkNoSecret(t, tg.requests()[0])
}

func TestARedirectFromHTTPSToHTTPIsNotFollowed(t *testing.T) {
	plain := newTarget(t, 0)
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/clear", http.StatusFound)
	}))
	t.Cleanup(secure.Close)
	d := httpaction.New(httpaction.Options{RootCAs: serverPool(secure)})
	msg, err := d.Deliver(context.Background(), secretAction(secure.URL+"/start"), testMeta())
	if err == nil {
		t.Fatalf("Deliver succeeded: %s", msg)
	}
	if !strings.Contains(msg, "from https to http") || strings.Contains(msg, plain.URL) {
		t.Errorf("message %q", msg)
	}
	if n := len(plain.requests()); n != 0 {
		t.Errorf("the http target got %d requests", n)
	}
}

func TestRedirectsStopAfterTen(t *testing.T) {
	loop := redirector(t, func(r *http.Request) string { return r.URL.Path + "x" })
	msg, err := httpaction.New(httpaction.Options{}).Deliver(context.Background(), httpAction(loop.URL+"/", "GET"), testMeta())
	if err == nil || !strings.Contains(msg, "stopped after 10 redirects") {
		t.Errorf("Deliver = %q, %v", msg, err)
	}
}
