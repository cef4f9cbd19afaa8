package httpaction_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/resched/resched/services/worker/internal/action/httpaction"
)

// BenchmarkDeliver is one HTTP delivery to a keep-alive target in the same process: the
// deliverer's share of a fire (the target's too, which a real target does not charge).
// "alone" and "attempt" go one after another, so they time a round trip in which both sides
// wait for each other within one process: since plain-http targets are called on the
// caller's goroutine (package plainhttp) they take longer there (49 → 71 µs), while the CPU of
// a busy worker, which "parallel" shows, fell (31-36 → 24-28 µs, 105 → 92 allocations).
func BenchmarkDeliver(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	d := httpaction.New(httpaction.Options{})
	defer d.Close()
	a := httpAction(srv.URL+"/hook?x=1", "POST")
	a.Request.Headers = map[string]string{"Content-Type": "application/json"}
	a.Request.Body = `{"hello":"world"}`
	m := testMeta()
	b.Run("alone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Deliver(context.Background(), a, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As a busy worker calls it: 64 deliveries at once, each an attempt as below. The target
	// shares the benchmark's process, so the figure is the deliverer's and the target's
	// together; a worker's own CPU per delivery is services/worker's BenchmarkWorkerHTTPDeliveries.
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(32) // 64 goroutines on this 2-core machine
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctx, cancel := context.WithTimeout(context.Background(), httpaction.DefaultTimeout)
				_, err := d.Deliver(ctx, a, m)
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	// As a worker calls it: the executor bounds the attempt by the same time-out, under the
	// consumer's cancellable context.
	b.Run("attempt", func(b *testing.B) {
		work, stop := context.WithCancel(context.Background())
		defer stop()
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(work, httpaction.DefaultTimeout)
			_, err := d.Deliver(ctx, a, m)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
