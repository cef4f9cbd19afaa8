package dispatch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resched/resched/services/planner/internal/dispatch"
	"github.com/resched/resched/services/planner/internal/jobs"
)

// dispatcherWaker is the jobs service's Waker for a dispatcher in the same process, as the
// planner's NATS one is across planners.
type dispatcherWaker struct {
	d atomic.Pointer[dispatch.Dispatcher]
}

func (w *dispatcherWaker) Wake(p int) { w.d.Load().Wake(p) }
func (w *dispatcherWaker) Changed(p int, jobs []string) {
	w.d.Load().Changed(p, jobs)
}

// claimCount is a dispatch.Metrics that counts the jobs claimed.
type claimCount struct {
	dispatch.Metrics
	n atomic.Int64
}

func (c *claimCount) Claimed(n int)         { c.n.Add(int64(n)) }
func (c *claimCount) Published(int)         {}
func (c *claimCount) Skipped(int)           {}
func (c *claimCount) FireLag(time.Duration) {}
func (c *claimCount) Error(string)          {}

// An occurrence that a batch read ahead of its time (the lookahead) and holds for it is not sent
// when its job changes meanwhile through the jobs service: once the change is answered, the
// job does not fire as it was. Under make run a job firing every second had fired 40-150 ms
// after its delete was answered in 5 deletes of 20, after a disable in 3 of 20, after its
// collection's disable in 6 of 20. The change comes between the claim and the send: the clock
// the dispatcher asks once the job is claimed makes it. A job put again unchanged is only
// read again and fires once, at its time; the job of another collection in the same batch is
// sent as read. Both collections are of one partition, which a batch reads at once.
func TestAHeldOccurrenceIsNotSentOnceItsJobChanged(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(e *env) error
		fires  []string // the jobs that fire, their collection's name first
	}{
		{"deleted", func(e *env) error { return e.svc.DeleteJob(ctx, "c", "a") }, []string{"other/b"}},
		{"deleted by the intake", func(e *env) error {
			return e.svc.Apply(ctx, []jobs.Change{{Collection: "c", Name: "a", Delete: true}})[0].Err
		}, []string{"other/b"}},
		{"disabled", func(e *env) error {
			_, _, err := e.svc.PutJob(ctx, "c", "a", []byte(`{"startTime":"2026-03-01T12:00:01Z","state":"Disabled",`+action+`}`), false)
			return err
		}, []string{"other/b"}},
		{"disabled by a patch", func(e *env) error {
			_, err := e.svc.PatchJob(ctx, "c", "a", []byte(`{"state":"Disabled"}`))
			return err
		}, []string{"other/b"}},
		{"collection disabled", func(e *env) error { _, err := e.svc.DisableCollection(ctx, "c"); return err }, []string{"other/b"}},
		{"collection deleted", func(e *env) error { return e.svc.DeleteCollection(ctx, "c") }, []string{"other/b"}},
		{"put again unchanged", func(e *env) error {
			_, _, err := e.svc.PutJob(ctx, "c", "a", []byte(`{"startTime":"2026-03-01T12:00:01Z",`+action+`}`), false)
			return err
		}, []string{"c/a", "other/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			other := "other"
			for i := 0; e.store.PartitionOf(other) != e.store.PartitionOf("c"); i++ {
				other = fmt.Sprint("other", i)
			}
			var w dispatcherWaker
			e.svc = jobs.New(jobs.Config{Store: e.store, Validator: e.validator, Subjects: e.subj, Clock: e.clock.now, Waker: &w})
			if _, _, err := e.svc.PutCollection(ctx, other, []byte(`{"properties":{}}`), false); err != nil {
				t.Fatal(err)
			}
			e.put("a", `{"startTime":"2026-03-01T12:00:01Z",`+action+`}`)
			if _, _, err := e.svc.PutJob(ctx, other, "b", []byte(`{"startTime":"2026-03-01T12:00:01Z",`+action+`}`), false); err != nil {
				t.Fatal(err)
			}
			// 50 ms before the occurrences, with a lookahead of 1 s: read and held for 50 ms.
			e.clock.set(t0.Add(950 * time.Millisecond))
			var m claimCount
			var changed atomic.Bool
			clock := func() time.Time {
				if m.n.Load() > 0 && !changed.Swap(true) {
					if err := tc.change(e); err != nil {
						t.Errorf("the change: %v", err)
					}
				}
				return e.clock.now()
			}
			d := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: clock,
				Metrics: &m, Lookahead: time.Second, MaxIdle: 5 * time.Millisecond})
			w.d.Store(d)
			e.once(d)
			if !changed.Load() {
				t.Fatal("the dispatcher never asked the time once it had claimed the jobs")
			}
			var got []string
			for _, due := range e.drain() {
				got = append(got, strings.Replace(due.Collection, other, "other", 1)+"/"+due.Job)
			}
			slices.Sort(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.fires) {
				t.Fatalf("fired %v, want %v", got, tc.fires)
			}
			// Nothing of the changed job is left to fire later either.
			e.clock.set(t0.Add(time.Minute))
			if n := e.once(d); n != 0 {
				t.Fatalf("a later round fired %d", n)
			}
		})
	}
}
