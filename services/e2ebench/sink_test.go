package e2ebench

import (
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// sink is the HTTP target: it records when each delivery arrived against the time it was due
// (the scheduler's x-ms-scheduler-expected-execution-time header).
type sink struct {
	url string

	mu    sync.Mutex
	lags  []time.Duration
	early int
	last  time.Time
}

func startSink(t testing.TB) *sink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{url: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	due, err := time.Parse(time.RFC3339Nano, r.Header.Get("x-ms-scheduler-expected-execution-time"))
	s.mu.Lock()
	if err == nil {
		lag := now.Sub(due)
		s.lags = append(s.lags, lag)
		if lag < 0 {
			s.early++
		}
	}
	s.last = now
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// reset forgets what was received.
func (s *sink) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lags, s.early, s.last = nil, 0, time.Time{}
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lags)
}

// stats are the lag percentiles, the largest, the early fires and the last arrival.
func (s *sink) stats() (p50, p99, max time.Duration, early int, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := slices.Clone(s.lags)
	slices.Sort(l)
	if len(l) == 0 {
		return 0, 0, 0, s.early, s.last
	}
	return l[len(l)/2], l[len(l)*99/100], l[len(l)-1], s.early, s.last
}
