package httpaction_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/tlstest"
	"github.com/resched/resched/services/worker/internal/action"
)

// received is one request as the target saw it.
type received struct {
	Method, Path, Query, Host string
	RequestURI                string // as sent
	Header                    http.Header
	Body                      string
	ClientCertSubject         string
}

// target is an HTTP server that records every request and answers with status (200 unless
// set) and a small body.
type target struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []received
	status int
}

func newTarget(t *testing.T, status int) *target {
	t.Helper()
	tg := &target{status: status}
	tg.Server = httptest.NewServer(http.HandlerFunc(tg.serve))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := received{Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone(), Body: string(body)}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		rec.ClientCertSubject = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	tg.mu.Lock()
	tg.reqs = append(tg.reqs, rec)
	tg.mu.Unlock()
	w.Header().Set("X-Target", "yes")
	w.Header().Set("Content-Type", "text/plain")
	if tg.status != 0 {
		w.WriteHeader(tg.status)
	}
	_, _ = io.WriteString(w, "hello from the target")
}

func (tg *target) requests() []received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]received(nil), tg.reqs...)
}

// hangingTarget accepts requests and never answers until the test ends. held is closed when
// the first request arrives.
func hangingTarget(t *testing.T) (url string, held <-chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	arrived := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for the handlers
	return srv.URL, arrived
}

// clientCert is a self-signed client certificate with its PFX.
type clientCert struct {
	cert     *x509.Certificate
	pfx      string // base64
	password string
}

func newClientCert(t *testing.T, cn, password string) clientCert {
	t.Helper()
	cert, pfx := tlstest.ClientCert(t, cn, password, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	return clientCert{cert: cert, pfx: pfx, password: password}
}

// mtlsTarget is a TLS target that requires a client certificate signed by (here: equal to)
// trusted.
func mtlsTarget(t *testing.T, trusted *x509.Certificate) *target {
	t.Helper()
	tg := &target{}
	tg.Server = httptest.NewUnstartedServer(http.HandlerFunc(tg.serve))
	pool := x509.NewCertPool()
	pool.AddCert(trusted)
	tg.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	tg.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	tg.StartTLS()
	t.Cleanup(tg.Close)
	return tg
}

func serverPool(servers ...*httptest.Server) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, s := range servers {
		pool.AddCert(s.Certificate())
	}
	return pool
}

func testMeta() action.Meta {
	return action.Meta{
		Collection:      "coll-1",
		Job:             "job_1",
		Scheduled:       time.Date(2026, 3, 1, 12, 30, 0, 0, time.FixedZone("X", 3600)),
		ExecutionTag:    "0123456789abcdef0123456789abcdef",
		ClientRequestID: "3c4b84e2-aee5-43ac-913e-c05c8827ac41",
		Occurrence:      3,
		Attempt:         1,
		Region:          "local",
	}
}
