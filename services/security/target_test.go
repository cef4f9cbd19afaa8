package security

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

// target is an HTTP target that records what each path received: when, and the credentials.
type target struct {
	addr string
	mu   sync.Mutex
	hits map[string][]hit
}

type hit struct {
	at            time.Time
	authorization string // the Authorization header as received
	functionKey   string // the x-functions-key header (an Azure Function's key)
	code          string // the query's code (the same, in the URL)
}

func startTarget(t *testing.T) *target {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{addr: l.Addr().String(), hits: map[string][]hit{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.hits[r.URL.Path] = append(tg.hits[r.URL.Path], hit{at: time.Now(), authorization: r.Header.Get("Authorization"),
			functionKey: r.Header.Get("X-Functions-Key"), code: r.URL.Query().Get("code")})
		tg.mu.Unlock()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return tg
}

func (tg *target) url(path string) string { return fmt.Sprintf("http://%s%s", tg.addr, path) }

// received returns what path received so far.
func (tg *target) received(path string) []hit {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]hit(nil), tg.hits[path]...)
}

// receivedSince counts what path received after a time.
func (tg *target) receivedSince(path string, since time.Time) int {
	n := 0
	for _, h := range tg.received(path) {
		if h.at.After(since) {
			n++
		}
	}
	return n
}

// waitDelivery waits for path to receive a request after since, and returns it.
func (tg *target) waitDelivery(t *testing.T, path string, since time.Time) hit {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "a delivery to "+path, func() bool { return tg.receivedSince(path, since) > 0 })
	got := tg.received(path)
	return got[len(got)-1]
}
