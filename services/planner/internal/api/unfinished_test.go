package api_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// A collection's state change or delete whose planner stopped after some of its calls (killed,
// or cut off from Redis) is finished by a planner once it has gone bus.StaleChangeAfter
// without a call, not before (its planner may only be slow). Left so, the jobs of an enabled
// collection not yet gone through never fired, those of a disabled one fired once more, and a
// deleted collection stayed with the jobs not yet deleted.
func TestAChangeLeftUnfinishedIsFinished(t *testing.T) {
	e := newEnv(t)
	const n = 2500
	e.putBig(t, n)
	ctx := context.Background()
	due := func(want int64) {
		t.Helper()
		if got, err := e.store.DueBacklog(ctx, t0.Add(48*time.Hour)); got != want || err != nil {
			t.Fatalf("%d jobs due, %v; want %d", got, err, want)
		}
	}
	finish := func(at time.Time, want int) {
		t.Helper()
		e.clock.Store(at.UnixNano())
		if got, err := e.svc.FinishStale(ctx); got != want || err != nil {
			t.Fatalf("at %s: %d changes finished, %v; want %d", at.Format(time.TimeOnly), got, err, want)
		}
	}
	e.ok(t, "collections.disable.big", "", nil)
	due(0)

	// An enable's first call, its planner gone after it: the collection reads Enabled.
	at := t0
	if _, err := e.store.SetCollectionState(ctx, "big", store.StateChange{State: job.CollectionEnabled, At: at}); err != nil {
		t.Fatal(err)
	}
	finish(at.Add(bus.StaleChangeAfter-time.Second), 0)
	due(0)
	finish(at.Add(bus.StaleChangeAfter+time.Second), 1)
	due(n)
	finish(at.Add(time.Hour), 0) // nothing left to finish

	// A disable's first call: the first 1,000 jobs no longer due, the others still.
	at = t0.Add(2 * time.Hour)
	if _, err := e.store.SetCollectionState(ctx, "big", store.StateChange{State: job.CollectionDisabled, At: at}); err != nil {
		t.Fatal(err)
	}
	due(n - 1000)
	finish(at.Add(bus.StaleChangeAfter+time.Second), 1)
	due(0)

	// A delete stopped after its first call, while an enable was under way (its first call
	// made): 1,000 jobs deleted, the collection still there.
	at = t0.Add(3 * time.Hour)
	enabling := store.StateChange{State: job.CollectionEnabled, At: at}
	step, err := e.store.SetCollectionState(ctx, "big", enabling)
	if err != nil {
		t.Fatal(err)
	}
	stopped := stopAfterScripts(t, e, 1)
	if _, err := stopped.DeleteCollection(ctx, "big", at); !errors.Is(err, errStopped) {
		t.Fatalf("the delete cut short: %v", err)
	}
	var c job.Collection
	e.ok(t, "collections.get.big", "", &c)
	// The enable's next call stops at the delete, which keeps its record.
	enabling.Then, enabling.After = true, step.Last
	if step, err := e.store.SetCollectionState(ctx, "big", enabling); err != nil || !step.Overtaken {
		t.Fatalf("the enable's next call during the delete: overtaken %v, %v; want it overtaken", step.Overtaken, err)
	}
	// Until it ends, the collection takes no put and no state change: they would be deleted
	// with it, or stop it.
	for _, req := range [][2]string{{"jobs.put.big.new", hourly}, {"collections.put.big", `{"properties": {}}`},
		{"collections.disable.big", ""}, {"jobs.bulk.big", `{"jobs": [{"name": "new", "properties": ` + hourly + `}]}`}} {
		if req[0] == "jobs.bulk.big" {
			var out struct {
				Value []struct {
					Status int                             `json:"status"`
					Error  *struct{ Code, Message string } `json:"error"`
				} `json:"value"`
			}
			e.ok(t, req[0], req[1], &out)
			if len(out.Value) != 1 || out.Value[0].Status != 409 || out.Value[0].Error == nil ||
				!strings.Contains(out.Value[0].Error.Message, "job collection big is being deleted") {
				t.Errorf("%s during the delete: %+v", req[0], out)
			}
			continue
		}
		if a := e.fail(t, req[0], req[1], "409", "Conflict"); !strings.Contains(a.Error.Message, "job collection big is being deleted") {
			t.Errorf("%s during the delete: %q", req[0], a.Error.Message)
		}
	}
	finish(at.Add(bus.StaleChangeAfter+time.Second), 1)
	e.fail(t, "collections.get.big", "", "404", "ResourceNotFound")
	// The disable's and the disable's finished by a planner (what its jobs left waiting there),
	// then the delete's.
	if got := e.purger.purged(); !slices.Equal(got, slices.Repeat([]string{"scheduler.due.big.>"}, 3)) {
		t.Errorf("purged %q, want the disabled, then deleted, collection's due subjects", got)
	}
	if keys := e.redis.Client(t).Keys(ctx, "test:*big*").Val(); len(keys) != 0 {
		t.Errorf("keys of the deleted collection left: %d, such as %s", len(keys), keys[0])
	}
	finish(at.Add(time.Hour), 0)

	// A planner killed once the collection was deleted in Redis, before its messages left the
	// due stream (its retries and error actions waiting there would still run): the name
	// takes no put until a planner has purged them.
	at = t0.Add(5 * time.Hour)
	e.putCollection(t, "small", `{}`)
	e.ok(t, "jobs.put.small.j", hourly, nil)
	if ok, err := e.store.DeleteCollection(ctx, "small", at); !ok || err != nil {
		t.Fatal(ok, err)
	}
	e.fail(t, "collections.put.small", `{"properties": {}}`, "409", "Conflict")
	finish(at.Add(bus.StaleChangeAfter+time.Second), 1)
	if got := e.purger.purged(); len(got) != 4 || got[3] != "scheduler.due.small.>" {
		t.Errorf("purged %q, want small's due subjects last", got)
	}
	e.putCollection(t, "small", `{}`) // ended: a new collection of the name
	finish(at.Add(time.Hour), 0)

	// A delete whose purge fails (the NATS server not answering) is answered done, and stays
	// recorded: the name takes no put until a planner has purged.
	at = t0.Add(7 * time.Hour)
	e.clock.Store(at.UnixNano())
	e.purger.failWith(errors.New("nats: timeout"))
	e.ok(t, "collections.delete.small", "", nil)
	e.fail(t, "collections.put.small", `{"properties": {}}`, "409", "Conflict")
	finish(at.Add(bus.StaleChangeAfter+time.Second), 1) // taken, the purge failing again
	e.fail(t, "collections.put.small", `{"properties": {}}`, "409", "Conflict")
	e.purger.failWith(nil)
	finish(at.Add(2*bus.StaleChangeAfter+2*time.Second), 1)
	if got := e.purger.purged(); len(got) != 5 || got[4] != "scheduler.due.small.>" {
		t.Errorf("purged %q, want small's due subjects again last", got)
	}
	e.putCollection(t, "small", `{}`)
}

// A job deleted whose messages were left on the due stream (its planner killed between the
// delete in Redis and their purge, or NATS not answering) has them removed by a planner once
// the delete is bus.StalePurgeAfter old, not before: left so, its retries and error actions
// waiting there went on calling its target. Only the deleted job's incarnation goes: a job put
// again under the name meanwhile is another, and is accepted at once.
func TestADeletedJobsMessagesLeftAreRemoved(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	incarnation := func() string {
		t.Helper()
		j, err := e.store.GetJob(ctx, "c", "j")
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(j.Incarnation, 10)
	}
	finish := func(at time.Time, want int) {
		t.Helper()
		e.clock.Store(at.UnixNano())
		if got, err := e.svc.FinishStale(ctx); got != want || err != nil {
			t.Fatalf("at %s: %d finished, %v; want %d", at.Format(time.TimeOnly), got, err, want)
		}
	}
	first := incarnation()
	// Deleted in Redis by a planner killed before the purge.
	at := t0.Add(time.Hour)
	if _, ok, err := e.store.DeleteJob(ctx, "c", "j", at); !ok || err != nil {
		t.Fatal(ok, err)
	}
	e.ok(t, "jobs.put.c.j", hourly, nil) // another job of the name, at once
	second := incarnation()
	finish(at.Add(bus.StalePurgeAfter-time.Second), 0)
	if got := e.purger.purged(); len(got) != 0 {
		t.Fatalf("purged %q before the delete was stale", got)
	}
	finish(at.Add(bus.StalePurgeAfter+time.Second), 1)
	if got := e.purger.purged(); !slices.Equal(got, []string{"scheduler.due.c.j@" + first}) {
		t.Fatalf("purged %q, want the deleted job's incarnation (%s) alone", got, first)
	}
	finish(at.Add(time.Hour), 0) // ended

	// Deleted through the API, the purge failing: answered done, removed once NATS answers.
	at = t0.Add(3 * time.Hour)
	e.clock.Store(at.UnixNano())
	e.purger.failWith(errors.New("nats: timeout"))
	e.ok(t, "jobs.delete.c.j", "", nil)
	// Taken, the purge failing again: said (the planner logs it), and the look stops there.
	e.clock.Store(at.Add(bus.StalePurgeAfter + time.Second).UnixNano())
	if n, err := e.svc.FinishStale(ctx); n != 0 || err == nil || !strings.Contains(err.Error(), "job c/j") {
		t.Fatalf("a purge failing again: %d finished, %v; want an error naming c/j", n, err)
	}
	e.purger.failWith(nil)
	finish(at.Add(2*bus.StalePurgeAfter+time.Second), 0) // taken a stale time ago, not yet
	finish(at.Add(2*bus.StalePurgeAfter+2*time.Second), 1)
	if got := e.purger.purged(); len(got) != 2 || got[1] != "scheduler.due.c.j@"+second {
		t.Fatalf("purged %q, want the second job's incarnation (%s) last", got, second)
	}
	finish(at.Add(time.Hour), 0)

	// A delete whose purge succeeds leaves nothing for a planner to do, through the API or
	// the intake.
	e.ok(t, "jobs.put.c.j", hourly, nil)
	e.ok(t, "jobs.delete.c.j", "", nil)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	fourth := incarnation()
	if out := e.svc.Apply(ctx, []jobs.Change{{Collection: "c", Name: "j", Delete: true}}); out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	if got := e.purger.purged(); len(got) != 4 || got[3] != "scheduler.due.c.j@"+fourth {
		t.Fatalf("purged %q, want the third job's at its delete, then the fourth's (%s)", got, fourth)
	}
	finish(at.Add(2*time.Hour), 0)
}

// A job disabled whose messages were left on the due stream (its planner killed between the
// disable in Redis and their purge) has them removed as a deleted job's are, once the disable
// is bus.StalePurgeAfter old; not when the job was enabled again meanwhile (its messages are
// then the enabled job's). A disable through the API or the intake purges at once.
func TestADisabledJobsMessagesLeftAreRemoved(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	rec, err := e.store.GetJob(ctx, "c", "j")
	if err != nil {
		t.Fatal(err)
	}
	purgedAlone := "scheduler.due.c.j@" + strconv.FormatInt(rec.Incarnation, 10)
	finish := func(at time.Time, want int) {
		t.Helper()
		e.clock.Store(at.UnixNano())
		if got, err := e.svc.FinishStale(ctx); got != want || err != nil {
			t.Fatalf("at %s: %d finished, %v; want %d", at.Format(time.TimeOnly), got, err, want)
		}
	}
	// Disabled in Redis by a planner killed before the purge.
	disable := func(at time.Time) {
		t.Helper()
		put := store.PutJob{Collection: "c", Name: "j", Definition: rec.Definition, Accepted: rec.Accepted,
			State: job.StateDisabled, At: at}
		if a := e.store.Apply(ctx, []store.Write{{Put: &put}})[0]; a.Err != nil || !a.Disabled {
			t.Fatalf("disable: %+v", a)
		}
	}
	at := t0.Add(time.Hour)
	disable(at)
	finish(at.Add(bus.StalePurgeAfter-time.Second), 0)
	finish(at.Add(bus.StalePurgeAfter+time.Second), 1)
	if got := e.purger.purged(); !slices.Equal(got, []string{purgedAlone}) {
		t.Fatalf("purged %q, want the job's incarnation alone", got)
	}
	finish(at.Add(time.Hour), 0) // ended

	// Enabled again through the API before a planner took it up: nothing to purge.
	at = t0.Add(3 * time.Hour)
	e.clock.Store(at.UnixNano())
	e.ok(t, "jobs.patch.c.j", `{"properties": {"state": "Enabled"}}`, nil)
	disable(at)
	e.ok(t, "jobs.patch.c.j", `{"properties": {"state": "Enabled"}}`, nil)
	finish(at.Add(bus.StalePurgeAfter+time.Second), 0)

	// Disabled through the API (a patch or a put) and the intake's batch: purged at once, each.
	e.ok(t, "jobs.patch.c.j", `{"properties": {"state": "Disabled"}}`, nil)
	e.ok(t, "jobs.patch.c.j", `{"properties": {"state": "Enabled"}}`, nil)
	e.ok(t, "jobs.put.c.j", `{"properties": {"state": "Disabled", "action": {"type": "Http", "request": {"method": "GET", "uri": "https://example.com/"}}}}`, nil)
	e.ok(t, "jobs.patch.c.j", `{"properties": {"state": "Enabled"}}`, nil)
	raw := []byte(`{"properties": {"state": "Disabled", "action": {"type": "Http", "request": {"method": "GET", "uri": "https://example.com/"}}}}`)
	if out := e.svc.Apply(ctx, []jobs.Change{{Collection: "c", Name: "j", Raw: raw}}); out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	if got := e.purger.purged(); !slices.Equal(got, slices.Repeat([]string{purgedAlone}, 4)) {
		t.Fatalf("purged %q, want the job's incarnation three more times", got)
	}
	finish(at.Add(time.Hour), 0)

	// A batch's purges are made at once, not one after another (which held the intake to a
	// few thousand deletes or disables a second): two disables and two deletes.
	batch := []jobs.Change{{Collection: "c", Name: "j", Raw: []byte(`{"properties": {"state": "Enabled", "action": {"type": "Http", "request": {"method": "GET", "uri": "https://example.com/"}}}}`)}}
	for _, n := range []string{"a", "b", "c"} {
		batch = append(batch, jobs.Change{Collection: "c", Name: n, Raw: []byte(hourly)})
	}
	for _, ch := range e.svc.Apply(ctx, batch) {
		if ch.Err != nil {
			t.Fatal(ch.Err)
		}
	}
	apart := e.purger.meetIn(4)
	batch = []jobs.Change{{Collection: "c", Name: "j", Raw: raw}, {Collection: "c", Name: "a", Raw: raw},
		{Collection: "c", Name: "b", Delete: true}, {Collection: "c", Name: "c", Delete: true}}
	for _, ch := range e.svc.Apply(ctx, batch) {
		if ch.Err != nil {
			t.Fatal(ch.Err)
		}
	}
	if n, got := apart(), e.purger.purged(); n != 0 || len(got) != 8 {
		t.Errorf("%d purges of 4 made alone; purged %q, want 4 more", n, got)
	}
}

// A collection's pause (disabled or suspended) stays recorded after its last call until its
// jobs' messages are gone from the due stream: a planner killed in between, or a NATS server
// not answering the purge, leaves it for a planner to purge and end bus.StaleChangeAfter later.
// Left so, the jobs' retries waiting there went on calling their targets.
func TestAPauseIsRecordedUntilItsPurge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	finish := func(at time.Time, want int) {
		t.Helper()
		e.clock.Store(at.UnixNano())
		if got, err := e.svc.FinishStale(ctx); got != want || err != nil {
			t.Fatalf("at %s: %d finished, %v; want %d", at.Format(time.TimeOnly), got, err, want)
		}
	}
	purged := func(want int) {
		t.Helper()
		if got := e.purger.purged(); len(got) != want || got[want-1] != "scheduler.due.c.>" {
			t.Fatalf("purged %q, want the collection's subjects %d times", got, want)
		}
	}
	// Every call made, its planner killed before the purge.
	at := t0
	ch := store.StateChange{State: job.CollectionDisabled, At: at}
	for {
		step, err := e.store.SetCollectionState(ctx, "c", ch)
		if err != nil {
			t.Fatal(err)
		}
		if step.Done {
			break
		}
		ch.Then, ch.After = true, step.Last
	}
	finish(at.Add(bus.StaleChangeAfter-time.Second), 0)
	finish(at.Add(bus.StaleChangeAfter+time.Second), 1)
	purged(1)
	finish(at.Add(time.Hour), 0) // ended

	// Suspended through the API, the purge failing: answered, and purged once NATS answers.
	at = t0.Add(2 * time.Hour)
	e.clock.Store(at.UnixNano())
	e.ok(t, "collections.enable.c", "", nil)
	e.purger.failWith(errors.New("nats: timeout"))
	e.ok(t, "collections.put.c", `{"properties": {"state": "Suspended"}}`, nil)
	finish(at.Add(bus.StaleChangeAfter+time.Second), 1) // taken, the purge failing again
	e.purger.failWith(nil)
	finish(at.Add(2*bus.StaleChangeAfter+2*time.Second), 1)
	purged(2)
	finish(at.Add(time.Hour), 0)

	// Disabled through the API: purged and ended at once.
	e.ok(t, "collections.enable.c", "", nil)
	e.ok(t, "collections.disable.c", "", nil)
	purged(3)
	finish(at.Add(2*time.Hour), 0)
}

// Two planners looking for stale changes at once: one finishes each.
func TestAStaleChangeIsFinishedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []string{"a", "b", "c"} {
		e.putCollection(t, c, `{}`)
		e.ok(t, "jobs.put."+c+".j", hourly, nil)
		e.ok(t, "collections.disable."+c, "", nil)
		if _, err := e.store.SetCollectionState(ctx, c, store.StateChange{State: job.CollectionEnabled, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Store(t0.Add(time.Minute).UnixNano())
	stale, err := e.store.Changes(ctx, t0.Add(time.Second), 10)
	if err != nil || len(stale) != 3 {
		t.Fatalf("stale changes %v %v, want 3", stale, err)
	}
	taken := 0
	for _, ch := range append(stale, stale...) { // the second look saw them as the first did
		if _, ok, err := e.store.TakeChange(ctx, ch, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		} else if ok {
			taken++
		}
	}
	if taken != 3 {
		t.Errorf("taken %d times, want 3 (each once)", taken)
	}
	// Taken at a minute past: no longer stale until StaleChangeAfter after that.
	if n, err := e.svc.FinishStale(ctx); n != 0 || err != nil {
		t.Errorf("finished %d, %v, right after being taken; want 0", n, err)
	}
}

var errStopped = errors.New("the planner stopped here")

// stopAfterScripts is a store on e's Redis whose calls fail once n scripts have run, as
// those of a planner killed after them.
func stopAfterScripts(t *testing.T, e *env, n int) *store.Store {
	rdb := redis.NewClient(&redis.Options{Addr: e.redis.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(&scriptStop{left: n})
	return store.New(rdb, "test")
}

type scriptStop struct{ left int }

func (*scriptStop) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptStop) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.process(ctx, []redis.Cmder{cmd}, func(ctx context.Context, _ []redis.Cmder) error { return next(ctx, cmd) })
	}
}

func (h *scriptStop) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return h.process(ctx, cmds, next) }
}

func (h *scriptStop) process(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	scripts := slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return strings.HasPrefix(c.Name(), "eval") })
	if scripts && h.left == 0 {
		for _, c := range cmds {
			c.SetErr(errStopped)
		}
		return errStopped
	}
	err := next(ctx, cmds)
	for _, c := range cmds {
		if strings.HasPrefix(c.Name(), "eval") && c.Err() == nil {
			h.left--
		}
	}
	return err
}
