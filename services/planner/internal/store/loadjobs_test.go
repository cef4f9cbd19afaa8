package store_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// TestLoadJobsReadsEachJobAtOneVersion: while jobs are put again and again, every job
// LoadJobs returns has the definition and the state one put wrote, never the definition of
// one put with the state of another. The dispatcher caches a compiled definition under the
// version read beside it: a definition older than its version would fire the old action for
// as long as the job stays cached.
func TestLoadJobsReadsEachJobAtOneVersion(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	putCollection(t, s, "c", 0)
	const jobs = 400
	members := make([]string, jobs)
	for i := range members {
		members[i] = store.Member("c", fmt.Sprint("j", i))
	}
	// Put i writes "i" as the definition and t0 + i ms as the next time: both say which put
	// a read saw. The definitions are long, so that the reads of one LoadJobs span several
	// of Redis's reads of the connection, between which other clients' commands run.
	pad := strings.Repeat(" ", 2000)
	put := func(j string, i int) error {
		_, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "c", Name: j, Definition: []byte(strconv.Itoa(i) + pad),
			Accepted: t0, Next: t0.Add(time.Duration(i) * time.Millisecond), State: job.StateEnabled, Reaccept: true})
		return err
	}
	for i := range jobs {
		if err := put(fmt.Sprint("j", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 2; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := put(fmt.Sprint("j", (i*7+w*101)%jobs), i); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for range 300 {
		recs, err := s.LoadJobs(ctx, members)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			i, err := strconv.Atoi(strings.TrimSpace(string(r.Definition)))
			if err != nil {
				t.Fatal(err)
			}
			if got := int(r.Next.Sub(t0) / time.Millisecond); got != i {
				t.Fatalf("%s: definition of put %d read with the state of put %d", r.Name, i, got)
			}
		}
	}
}

// TestLoadClaimedLeavesOutTheDefinitionsHeld: the jobs read as LoadJobs reads them, without
// the definitions the caller holds and the status counters; a missing job is nil either way.
func TestLoadClaimedLeavesOutTheDefinitionsHeld(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "a", t0)
	putJob(t, s, "c", "b", t0.Add(time.Minute))
	if _, err := s.ApplyResult(ctx, "c", "a", store.Outcome{Entry: job.HistoryEntry{StartTime: t0, ActionName: job.ActionNameMain,
		Status: job.ExecutionFailed}, Scheduled: t0, Occurrence: 1, MainDone: true}, t0); err != nil {
		t.Fatal(err)
	}
	members := []string{store.Member("c", "a"), store.Member("c", "b"), store.Member("c", "gone"), store.Member("c", "gone2")}
	whole, err := s.LoadJobs(ctx, members)
	if err != nil {
		t.Fatal(err)
	}
	if whole[0] == nil || whole[0].Executions != 1 || whole[0].Failures != 1 {
		t.Fatalf("LoadJobs read job a as %+v, want its counters", whole[0])
	}
	got, err := s.LoadClaimed(ctx, members, func(i int) bool { return i%2 == 0 })
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range whole {
		g := got[i]
		if (w == nil) != (g == nil) {
			t.Fatalf("%s: LoadJobs %v, LoadClaimed %v", members[i], w, g)
		}
		if w == nil {
			continue
		}
		if held := i%2 == 0; held != (g.Definition == nil) {
			t.Errorf("%s: held %v, definition %q", members[i], held, g.Definition)
		}
		if i%2 == 0 {
			w.Definition = nil
		}
		w.Counters = store.Counters{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: LoadClaimed %+v, LoadJobs %+v", members[i], g, w)
		}
	}
	if got[0] == nil || got[1] == nil || got[2] != nil || got[3] != nil {
		t.Errorf("LoadClaimed found %v", got)
	}
}

// Redis at its maxmemory refuses every command queued in a transaction, reads too. LoadJobs
// (the API's reads) reads on, so that an operator can list what to delete; LoadClaimed (the
// dispatcher's) does not, so that nothing is published that could not be advanced.
func TestOutOfMemoryOnlyTheAPIReads(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	s := store.New(rdb, "test")
	ctx := context.Background()
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // any use is over it
		t.Fatal(err)
	}
	members := []string{store.Member("c", "j")}
	if got, err := s.LoadJobs(ctx, members); err != nil || len(got) != 1 || got[0] == nil || got[0].Definition == nil {
		t.Fatalf("LoadJobs out of memory: %v, %v; want the job", got, err)
	}
	if _, err := s.LoadClaimed(ctx, members, func(int) bool { return false }); err == nil {
		t.Fatal("LoadClaimed read the job out of memory; want the transaction refused")
	}
}
