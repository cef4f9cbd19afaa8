package jobs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// A collection's state change and its deletion go on to their end when the request's client
// gives up (its context ends): cut short between two of their Redis calls, they would leave
// some jobs done and others not.
func TestCollectionWorkOutlastsItsRequest(t *testing.T) {
	st := store.New(redistest.Start(t).Client(t), "test")
	s := New(Config{Store: st})
	ctx := context.Background()
	if _, err := st.PutCollection(ctx, "c", []byte(`{}`), job.CollectionEnabled, 0, false); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range 2500 {
		if _, _, _, err := st.PutJob(ctx, store.PutJob{Collection: "c", Name: fmt.Sprintf("j%04d", i), Definition: []byte(`{}`),
			Accepted: at, Next: at, State: job.StateEnabled, Reaccept: true}); err != nil {
			t.Fatal(err)
		}
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.setState(gone, "c", job.CollectionDisabled); err != nil {
		t.Fatalf("disable with its request's context ended: %v", err)
	}
	if due, _ := st.DueBacklog(ctx, at); due != 0 {
		t.Errorf("%d jobs left due after the disable", due)
	}
	if err := s.DeleteCollection(gone, "c"); err != nil {
		t.Fatalf("delete with its request's context ended: %v", err)
	}
	if names, _ := st.JobNames(ctx, "c"); len(names) != 0 {
		t.Errorf("%d jobs left after the delete", len(names))
	}
}
