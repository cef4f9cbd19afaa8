package results_test

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/results"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// flakyStore fails its first calls, as Redis does while it is down (or with err); with panics,
// its first calls panic instead, as a bug would.
type flakyStore struct {
	mu       sync.Mutex
	failures int
	panics   int
	err      error
	applied  []store.Outcome
	done     chan struct{}
}

func (f *flakyStore) ApplyResults(_ context.Context, rs []store.Result, _ time.Time) []store.ResultApplied {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panics > 0 {
		f.panics--
		var m map[string]int
		m["x"]++ // a nil map
	}
	out := make([]store.ResultApplied, len(rs))
	for i, r := range rs {
		if f.failures > 0 {
			f.failures--
			out[i].Err = cmp.Or(f.err, errors.New("dial tcp: connection refused"))
			continue
		}
		f.applied = append(f.applied, r.Outcome)
		close(f.done)
	}
	return out
}

// A result that fails inside the planner comes back after the retry delay and is applied.
func TestStoreErrorRedeliversTheResult(t *testing.T) {
	m, logs := redeliver(t, nil)
	if got := m.errors("result_apply"); got != 2 {
		t.Errorf("apply errors %d, want 2", got)
	}
	if n := strings.Count(logs.String(), "apply failed; retrying"); n != 2 {
		t.Errorf("%d error lines, want one a failure:\n%s", n, logs)
	}
}

// A result Redis refuses for its maxmemory waits as well, counted as an apply error, but the
// log says it once, not at each retry (one a second while Redis stays full).
func TestRedisFullRedeliversTheResultSaidOnce(t *testing.T) {
	m, logs := redeliver(t, errors.New("OOM command not allowed when used memory > 'maxmemory'."))
	if got := m.errors("result_apply"); got != 2 {
		t.Errorf("apply errors %d, want 2", got)
	}
	if out := logs.String(); strings.Count(out, "Redis is at its maxmemory") != 1 || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("the consumer logged:\n%s\nwant one warning and no error", out)
	}
}

// A result met by its Redis Cluster slot moving (a reshard) is retried the same way, counted
// apart: the planners' error alert leaves slot_moving out.
func TestSlotMovingRedeliversTheResultCountedApart(t *testing.T) {
	m, _ := redeliver(t, errors.New("ASK 3999 127.0.0.1:6381"))
	if moving, failed := m.errors("slot_moving"), m.errors("result_apply"); moving != 2 || failed != 0 {
		t.Errorf("slot_moving %d, result_apply %d; want 2 and 0", moving, failed)
	}
}

// A batch of results whose apply panics (a bug) is handed back and comes again after the retry
// delay, the planner going on; the panic is logged with its stack. Unrecovered, it stopped the
// planner, and the results, delivered again, each planner after it.
func TestAPanicInAnApplyRedeliversTheResults(t *testing.T) {
	_, logs := redeliverFrom(t, &flakyStore{panics: 2, done: make(chan struct{})})
	out := logs.String()
	if strings.Count(out, "panic recovered: results message") != 2 || !strings.Contains(out, "assignment to entry in nil map") {
		t.Errorf("the consumer logged:\n%s\nwant each panic, with what it was", out)
	}
}

// redeliver publishes a result to a consumer whose store fails twice with storeErr (a connection
// refused when nil), waits until it is applied, and returns the consumer's metrics and log.
func redeliver(t *testing.T, storeErr error) (*recorder, *testenv.LogBuffer) {
	return redeliverFrom(t, &flakyStore{failures: 2, err: storeErr, done: make(chan struct{})})
}

// redeliverFrom is redeliver with the store given.
func redeliverFrom(t *testing.T, fs *flakyStore) (*recorder, *testenv.LogBuffer) {
	ctx := context.Background()
	nc := natstest.Start(t).Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subj := bus.NewSubjects("acme.sched")
	if _, err := bus.EnsureStreams(ctx, js, subj, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	m := &recorder{}
	e := &env{t: t}
	logs := &testenv.LogBuffer{}
	e.start(results.New(results.Config{JS: js, Store: fs, Subjects: subj, Metrics: m, RetryDelay: 10 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}))

	r := attempt("j", job.ActionNameMain, 0, job.ExecutionCompleted, true, false)
	e.js, e.subj = js, subj
	e.publish(r)
	select {
	case <-fs.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the result was not applied within 10 s")
	}
	e.settled()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.applied) != 1 || fs.applied[0].Entry != r.HistoryEntry() || !fs.applied[0].Final || !fs.applied[0].Scheduled.Equal(t0) {
		t.Errorf("applied %+v", fs.applied)
	}
	return m, logs
}
