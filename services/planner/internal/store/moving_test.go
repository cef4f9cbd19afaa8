package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
)

// While a Redis Cluster slot moves to another master (a reshard), results applied to a job of
// it fail, each with an error store.Moving recognizes (ASK, MOVED, TRYAGAIN), so that the
// planner retries them without counting a fault; once the slot has moved, they apply. The
// writes wait for a replica (AutoReplicas, the planners' default), so they go through the
// master's own client, which does not follow the slot.
func TestResultsDuringASlotMoveFailAsMoving(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := redistest.StartCluster(t, 3, 1)
	s := store.New(rc.Client(t), "test", store.WithMinReplicas(store.AutoReplicas, time.Second))
	firstWrite(t, s)
	for j := range 20 { // keys enough that the slot stays half moved for a while
		putJob(t, s, "c", fmt.Sprint("j", j), t0)
	}
	apply := applier(s, "c", "j0")
	applied := 0
	var mu sync.Mutex
	var failed []error
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			applied++
			if err := apply(); err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		}
	}()
	key := fmt.Sprintf("test:{p%02d}:due", s.PartitionOf("c"))
	rc.MoveSlot(rc.Slot(key), rc.AddMaster(), 20*time.Millisecond)
	close(stop)
	<-done
	if len(failed) == 0 {
		t.Fatal("no result failed while the slot moved: the test did not meet a half moved slot")
	}
	for _, err := range failed {
		if !store.Moving(err) {
			t.Errorf("a result failed while the slot moved with %v, which Moving does not recognize", err)
		}
	}
	t.Logf("%d of %d results failed while the slot moved, e.g. %v", len(failed), applied, failed[0])
	testenv.Eventually(t, 10*time.Second, "a result applied on the slot's new master", func() bool { return apply() == nil })
}
