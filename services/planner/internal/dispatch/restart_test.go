package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// Redis (with its append-only file) and NATS (JetStream on disk) restart while a planner runs:
// every occurrence is published once and stays in the due stream; nothing is lost.
func TestRestartsLoseNothing(t *testing.T) {
	ctx := context.Background()
	e := setup(t, redistest.WithPersistence())
	const perGroup = 100
	def := blob(t, `{"startTime":"2026-03-01T12:00:00Z",`+action+`}`)
	for i := range 2 * perGroup {
		due := t0
		if i >= perGroup {
			due = t0.Add(time.Minute) // the second group falls due after the restarts
		}
		if _, _, _, err := e.store.PutJob(ctx, store.PutJob{Collection: "c", Name: fmt.Sprint("j", i), Definition: def,
			Accepted: t0, Next: due, State: job.StateEnabled, Reaccept: true}); err != nil {
			t.Fatal(err)
		}
	}
	var count counter
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	d := e.dispatcher(&count)
	wg.Go(func() { _ = d.Run(runCtx) })
	defer func() { cancel(); wg.Wait() }()

	e.clock.set(t0.Add(time.Second))
	testenv.Eventually(t, 30*time.Second, "the first group to be published", func() bool { return count.published.Load() == perGroup })
	e.redis.Restart()
	e.nats.Restart()
	e.clock.set(t0.Add(time.Minute + time.Second))
	testenv.Eventually(t, 30*time.Second, "the second group to be published after the restarts", func() bool { return count.published.Load() == 2*perGroup })

	info, err := e.js.Stream(ctx, e.subj.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 2*perGroup {
		t.Fatalf("due stream holds %d messages after the restarts, want %d", n, 2*perGroup)
	}
	// Publishes are counted before their batch is advanced: wait for the advance too.
	testenv.Eventually(t, 30*time.Second, "every job to be advanced", func() bool {
		backlog, err := e.store.DueBacklog(ctx, t0.Add(time.Hour))
		return err == nil && backlog == 0
	})
}
