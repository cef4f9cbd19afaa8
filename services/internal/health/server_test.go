package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/resched/resched/services/internal/health"
)

func ok(context.Context) error { return nil }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestReadyz(t *testing.T) {
	blocked := make(chan struct{})
	t.Cleanup(func() { close(blocked) })
	tests := []struct {
		name    string
		checks  []health.Check
		code    int
		reasons map[string]string
	}{
		{name: "no checks", code: 200},
		{name: "all pass", checks: []health.Check{{"nats", ok}, {"redis", ok}}, code: 200},
		{
			name: "one fails",
			checks: []health.Check{{"nats", func(context.Context) error { return errors.New("not connected (RECONNECTING)") }},
				{"redis", ok}},
			code: 503, reasons: map[string]string{"nats": "not connected (RECONNECTING)"},
		},
		{
			// A check that ignores its context still cannot hold the probe past the timeout.
			name:   "one hangs",
			checks: []health.Check{{"nats", ok}, {"redis", func(context.Context) error { <-blocked; return nil }}},
			code:   503, reasons: map[string]string{"redis": "no answer: context deadline exceeded"},
		},
		{
			name: "every failure is named",
			checks: []health.Check{{"startup", func(context.Context) error { return errors.New("starting") }},
				{"redis", func(ctx context.Context) error { return errors.New("connection refused") }}},
			code: 503, reasons: map[string]string{"startup": "starting", "redis": "connection refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := health.Handler(health.Config{Ready: tt.checks, Timeout: 20 * time.Millisecond})
			code, body := get(t, h, "/readyz")
			if code != tt.code {
				t.Errorf("code %d, want %d (body %s)", code, tt.code, body)
			}
			var got struct {
				Status  string            `json:"status"`
				Reasons map[string]string `json:"reasons"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if len(got.Reasons) != len(tt.reasons) {
				t.Errorf("reasons %v, want %v", got.Reasons, tt.reasons)
			}
			for k, v := range tt.reasons {
				if got.Reasons[k] != v {
					t.Errorf("reason of %s: %q, want %q", k, got.Reasons[k], v)
				}
			}
			if want := map[int]string{200: "ready", 503: "not ready"}[tt.code]; got.Status != want {
				t.Errorf("status %q, want %q", got.Status, want)
			}
		})
	}
}

func TestHealthzIgnoresReadiness(t *testing.T) {
	h := health.Handler(health.Config{Ready: []health.Check{{"redis", func(context.Context) error { return errors.New("down") }}}})
	if code, body := get(t, h, "/healthz"); code != 200 || !strings.Contains(body, `"alive"`) {
		t.Errorf("/healthz = %d %s", code, body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", rec.Code)
	}
}

// /healthz tells the version, and fails (so the process is restarted) when a liveness
// condition fails: a connection that can never succeed again.
func TestHealthzTellsTheVersionAndFailsWhenDead(t *testing.T) {
	var dead error
	h := health.Handler(health.Config{Version: "v1.2.3", Live: []health.Check{{"nats", func(context.Context) error { return dead }}}})
	if code, body := get(t, h, "/healthz"); code != 200 || !strings.Contains(body, `"version":"v1.2.3"`) {
		t.Errorf("/healthz = %d %s", code, body)
	}
	dead = errors.New("authorization violation: the connection is closed for good")
	if code, body := get(t, h, "/healthz"); code != 503 || !strings.Contains(body, `"dead"`) || !strings.Contains(body, "authorization violation") {
		t.Errorf("/healthz with a dead connection = %d %s, want 503 naming it", code, body)
	}
}

func TestMetricsExposesTheRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "resched_planner_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	code, body := get(t, health.Handler(health.Config{Gatherer: reg}), "/metrics")
	if code != 200 || !strings.Contains(body, "resched_planner_test_total 3") {
		t.Errorf("/metrics = %d:\n%s", code, body)
	}
	if strings.Contains(body, "go_goroutines") {
		t.Error("/metrics exposes the global registry")
	}
}

func TestProfilingOnlyWhenAskedFor(t *testing.T) {
	if code, _ := get(t, health.Handler(health.Config{}), "/debug/pprof/heap?debug=1"); code != 404 {
		t.Errorf("profiles served without Profiling: %d", code)
	}
	code, body := get(t, health.Handler(health.Config{Profiling: true}), "/debug/pprof/heap?debug=1")
	if code != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("/debug/pprof/heap with Profiling = %d %.80s", code, body)
	}
}

func TestServerListensAndShutsDown(t *testing.T) {
	srv, err := health.Listen("127.0.0.1:0", health.Handler(health.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	resp, err := http.Get("http://" + srv.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/healthz over TCP = %d", resp.StatusCode)
	}
	if _, err := health.Listen(srv.Addr().String(), http.NotFoundHandler()); err == nil {
		t.Error("a second server on the same port started")
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}
