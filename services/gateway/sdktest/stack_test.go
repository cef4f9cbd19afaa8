package sdktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// audience is what the test issuer's tokens are for, and what the gateway asks.
const audience = "api://resched-gateway"

// stack is Redis, NATS, a planner, a worker and a gateway (HTTPS, a test OIDC issuer, static
// tokens), with an HTTP target, as an operator runs them.
type stack struct {
	base    string       // the gateway's HTTPS URL
	caFile  string       // the CA of the gateway's certificate
	natsURL string       // the planners' NATS server
	client  *http.Client // trusts the gateway's CA and validates every answer against the swagger
	checker *swaggerChecker
	target  *target
	issuer  *issuer
	gateway *testenv.Proc

	fastOnce   sync.Once
	fastClient *http.Client
}

func startStack(t testing.TB) *stack {
	t.Helper()
	dir := t.TempDir()
	rdb := redistest.Start(t)
	ns := natstest.Start(t)
	bin := testenv.Build(t, "planner", "worker", "gateway")
	s := &stack{target: startTarget(t), issuer: startIssuer(t), natsURL: ns.ClientURL()}

	plannerHTTP := testenv.FreeAddr(t)
	planner := testenv.Start(t, dir, "planner", filepath.Join(bin, "planner"), []string{"NATS_URL=" + ns.ClientURL(),
		"REDIS_URL=" + rdb.URL(), "RESCHED_PLANNER_HTTP_ADDR=" + plannerHTTP, "RESCHED_PLANNER_LOG_LEVEL=warn"})
	worker := testenv.Start(t, dir, "worker", filepath.Join(bin, "worker"), []string{"NATS_URL=" + ns.ClientURL(),
		"RESCHED_WORKER_HTTP_ADDR=" + testenv.FreeAddr(t), "RESCHED_WORKER_LOG_LEVEL=warn"})
	testenv.Eventually(t, 30*time.Second, "the planner ready", func() bool { return testenv.Status("http://"+plannerHTTP+"/readyz") == 200 }, planner.Tail)

	ca := tlstest.NewCA(t, "gateway")
	pair := ca.Server(t, "gateway")
	access := filepath.Join(dir, "access.json")
	writeJSON(t, access, map[string]any{
		"tokens": []map[string]any{
			{"name": "operator", "token": "operator-token", "role": "operator", "scopes": []string{"/subscriptions/sub-1", "/subscriptions/sub-2/resourceGroups/rg-x"}},
			{"name": "reader", "token": "reader-token", "role": "reader", "scopes": []string{"*"}},
			{"name": "admin", "token": "admin-token", "role": "operator", "scopes": []string{"*"}},
		},
		"principals": []map[string]any{{"claim": "sub", "value": "alice", "role": "operator", "scopes": []string{"/subscriptions/sub-1"}}},
	})
	addr := testenv.FreeAddr(t)
	s.gateway = testenv.Start(t, dir, "gateway", filepath.Join(bin, "gateway"), []string{"NATS_URL=" + ns.ClientURL(),
		"RESCHED_GATEWAY_ADDR=" + addr, "RESCHED_GATEWAY_HTTP_ADDR=" + testenv.FreeAddr(t),
		"RESCHED_GATEWAY_TLS_CERT=" + pair.CertFile, "RESCHED_GATEWAY_TLS_KEY=" + pair.KeyFile,
		"RESCHED_GATEWAY_ACCESS_FILE=" + access, "RESCHED_GATEWAY_OIDC_ISSUER=" + s.issuer.url,
		"RESCHED_GATEWAY_OIDC_AUDIENCE=" + audience})
	s.base, s.caFile = "https://"+addr, ca.CertFile
	s.checker = newSwaggerChecker(t, s.base)
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &recordingTransport{checker: s.checker,
		next: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, ca.CertFile), MinVersion: tls.VersionTLS12}}}}
	testenv.Eventually(t, 30*time.Second, "the gateway up", func() bool {
		resp, err := s.client.Get(s.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, s.gateway.Tail)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway:\n%s\nplanner:\n%s\nworker:\n%s", s.gateway.Tail(), planner.Tail(), worker.Tail())
		}
	})
	return s
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func pool(t testing.TB, caFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	return p
}

// recordingTransport keeps every answer's body (to look for secrets) and has each checked
// against the swagger.
type recordingTransport struct {
	next    http.RoundTripper
	checker *swaggerChecker
	mu      sync.Mutex
	bodies  []string
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	rt.mu.Lock()
	rt.bodies = append(rt.bodies, string(body))
	rt.mu.Unlock()
	rt.checker.check(req, resp, body)
	return resp, nil
}

// answers are every body the gateway sent.
func (s *stack) answers() string {
	rt := s.client.Transport.(*recordingTransport)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return strings.Join(rt.bodies, "\n")
}

// swaggerChecker validates answers against the official swagger (converted to OpenAPI 3 by
// kin-openapi), and counts the operations it checked.
type swaggerChecker struct {
	t      testing.TB
	router routers.Router
	mu     sync.Mutex
	errs   []string
	seen   map[string]int // operationId → answers checked
}

func newSwaggerChecker(t testing.TB, base string) *swaggerChecker {
	t.Helper()
	raw, err := os.ReadFile("testdata/scheduler-2016-03-01.json")
	if err != nil {
		t.Fatal(err)
	}
	var v2 openapi2.T
	if err := json.Unmarshal(raw, &v2); err != nil {
		t.Fatal(err)
	}
	v3, err := openapi2conv.ToV3(&v2)
	if err != nil {
		t.Fatal(err)
	}
	v3.Servers = openapi3.Servers{{URL: base}}
	if err := v3.Validate(context.Background()); err != nil {
		t.Fatalf("the swagger converted: %v", err)
	}
	r, err := legacy.NewRouter(v3)
	if err != nil {
		t.Fatal(err)
	}
	c := &swaggerChecker{t: t, router: r, seen: map[string]int{}}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range c.errs {
			t.Error(e)
		}
	})
	return c
}

func (c *swaggerChecker) check(req *http.Request, resp *http.Response, body []byte) {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return // not an operation of the swagger (the provider, resource groups, /healthz)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	err = openapi3filter.ValidateResponse(req.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: resp.StatusCode < 300},
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[route.Operation.OperationID]++
	if err != nil {
		c.errs = append(c.errs, route.Operation.OperationID+": the answer breaks the swagger: "+err.Error()+"\n"+string(body))
	}
}

// target is an HTTP target: /ok answers 200, /fail 500; it counts what it receives.
type target struct {
	url string
	mu  sync.Mutex
	got map[string]int // path → requests
}

func startTarget(t testing.TB) *target {
	tg := &target{got: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.got[r.URL.Path]++
		tg.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/fail") {
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	tg.url = srv.URL
	return tg
}

func (tg *target) count(path string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.got[path]
}

// issuer is an OpenID Connect issuer: its discovery document and keys, and tokens it signs.
type issuer struct {
	url string
	key *rsa.PrivateKey
}

func startIssuer(t testing.TB) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": is.url, "jwks_uri": is.url + "/keys",
			"authorization_endpoint": is.url + "/authorize", "token_endpoint": is.url + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

// token signs a JWT for subject, valid until exp, with key (the issuer's unless another).
func (is *issuer) token(t *testing.T, subject string, exp time.Time, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = is.key
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(jwt.Claims{Issuer: is.url, Subject: subject, Audience: jwt.Audience{audience},
		Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(exp.Add(-time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
