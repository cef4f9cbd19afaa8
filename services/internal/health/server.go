// Package health is the HTTP side of the planner and the worker: /healthz (the process is
// alive and can still do its work some day; it answers the version too), /readyz (it can do its work: every readiness check passes within a short timeout) and
// /metrics (Prometheus). Kubernetes restarts a process whose /healthz fails and stops routing to
// one whose /readyz fails; neither takes traffic over HTTP, so readiness is mostly for
// operators and rollouts.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness condition, such as "Redis answers". Func returns nil when it holds.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// Config gathers the handler's dependencies.
type Config struct {
	Gatherer prometheus.Gatherer // what /metrics exposes
	Version  string              // told by /healthz
	// Live are the conditions without which the process can never work again (a NATS
	// connection closed for good, credentials refused): one failing makes /healthz answer 503,
	// so an orchestrator restarts the process.
	Live    []Check
	Ready   []Check       // every one must pass for /readyz to answer 200
	Timeout time.Duration // bound on all the readiness checks together; default 2 s
	// Profiling serves Go's profiles under /debug/pprof/ (net/http/pprof). Off by default:
	// a profile costs CPU while it runs and tells the code's shape to whoever can reach the port.
	Profiling bool
	Logger    *slog.Logger
}

// Handler serves /healthz, /readyz and /metrics.
func Handler(cfg Config) http.Handler {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if reasons := cfg.check(r.Context(), cfg.Live); len(reasons) > 0 {
			writeJSON(w, http.StatusServiceUnavailable, status{Status: "dead", Version: cfg.Version, Reasons: reasons})
			return
		}
		writeJSON(w, http.StatusOK, status{Status: "alive", Version: cfg.Version})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if reasons := cfg.check(r.Context(), cfg.Ready); len(reasons) > 0 {
			writeJSON(w, http.StatusServiceUnavailable, status{Status: "not ready", Reasons: reasons})
			return
		}
		writeJSON(w, http.StatusOK, status{Status: "ready"})
	})
	if cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		}))
	}
	if cfg.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// status is the body of /healthz and /readyz.
type status struct {
	Status  string            `json:"status"`
	Version string            `json:"version,omitempty"`
	Reasons map[string]string `json:"reasons,omitempty"` // check name → why it fails
}

// check runs checks side by side and returns the reasons of those that fail.
func (cfg Config) check(ctx context.Context, checks []Check) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var mu sync.Mutex
	reasons := map[string]string{}
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			if err := run(ctx, c); err != nil {
				mu.Lock()
				reasons[c.Name] = err.Error()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return reasons
}

// run runs a check, giving up at the deadline even if the check ignores its context.
func run(ctx context.Context, c Check) error {
	done := make(chan error, 1)
	go func() { done <- c.Func(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
}

func writeJSON(w http.ResponseWriter, code int, v status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is the HTTP server, listening from Listen on.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen binds addr (":8081", "127.0.0.1:0") so that a port in use fails the start at once.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health: listen on %s: %w", addr, err)
	}
	return &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve answers requests until Shutdown, then returns nil.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("health: serve: %w", err)
	}
	return nil
}

// Shutdown stops accepting requests and waits for those in hand, until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }
