package redisconn_test

import (
	"context"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redisconn"
	"github.com/resched/resched/services/internal/redistest"
)

// A server that hangs (paused with SIGSTOP: its connections stay open, nothing answers) must
// not hold a call past its caller's deadline, in every topology: the lease and dispatch calls
// count on it. Without ContextTimeoutEnabled a call with a 300 ms deadline took the read
// time-outs of its tries: 5 s on one server and on a Cluster, 3 s with Sentinel.
func TestACallToAHungServerEndsAtItsDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and a Sentinel set")
	}
	const key = "resched:{p00}:due"
	single := redistest.Start(t)
	sentinel := redistest.StartSentinel(t)
	cluster := redistest.StartCluster(t, 3, 1)
	for _, c := range []struct {
		name, url string
		hung      func() *redistest.Server
	}{
		{"one server", single.URL(), func() *redistest.Server { return single }},
		{"sentinel", sentinel.URL(), sentinel.CurrentMaster},
		{"cluster", cluster.URL(), func() *redistest.Server { return cluster.MasterOf(key) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb, err := redisconn.Options{URL: c.url}.Client("test", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rdb.Close() })
			ctx := context.Background()
			if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil { // connected, the slot map known
				t.Fatal(err)
			}
			s := c.hung()
			s.Pause()
			defer s.Resume()
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err = rdb.Get(cctx, key).Err()
			took := time.Since(start)
			t.Logf("GET with a 300 ms deadline: %v after %v", err, took.Round(time.Millisecond))
			if err == nil {
				t.Fatal("a paused server answered")
			}
			// Room for a loaded machine; the read time-outs are 3 s and 5 s.
			if took > 1500*time.Millisecond {
				t.Errorf("the call took %v, past its 300 ms deadline", took)
			}
		})
	}
}
