package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds the readiness checks together.
const readyTimeout = 2 * time.Second

// check is one readiness condition; fn returns nil when it holds.
type check struct {
	name string
	fn   func(context.Context) error
}

// healthHandler serves /healthz (the process is alive), /readyz (every check passes) and
// /metrics. Kubernetes restarts a worker whose /healthz fails; a worker takes no traffic over
// HTTP, so readiness is for operators and rollouts.
func healthHandler(g prometheus.Gatherer, logger *slog.Logger, checks []check) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, http.StatusOK, status{Status: "alive"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if reasons := ready(r.Context(), checks); len(reasons) > 0 {
			writeStatus(w, http.StatusServiceUnavailable, status{Status: "not ready", Reasons: reasons})
			return
		}
		writeStatus(w, http.StatusOK, status{Status: "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}))
	return mux
}

// status is the body of /healthz and /readyz.
type status struct {
	Status  string            `json:"status"`
	Reasons map[string]string `json:"reasons,omitempty"` // check name → why it fails
}

// ready runs the checks side by side and returns the reasons of those that fail, giving up on
// a check that does not answer within readyTimeout.
func ready(ctx context.Context, checks []check) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var mu sync.Mutex
	reasons := map[string]string{}
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() {
			done := make(chan error, 1)
			go func() { done <- c.fn(ctx) }()
			var err error
			select {
			case err = <-done:
			case <-ctx.Done():
				err = fmt.Errorf("no answer: %w", ctx.Err())
			}
			if err != nil {
				mu.Lock()
				reasons[c.name] = err.Error()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return reasons
}

func writeStatus(w http.ResponseWriter, code int, v status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
