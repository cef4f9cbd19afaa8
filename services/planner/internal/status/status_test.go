package status_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/status"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// With Redis down, the status still answers: what Redis holds is named as not read, and the
// streams, which NATS holds, are shown. With Redis back, the problems are gone.
func TestStatusWithRedisDown(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Start(t)
	_, js, subjects := natstest.Start(t).JetStream(t)
	if _, err := js.CreateOrUpdateConsumer(ctx, subjects.DueStream(), jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	st := store.New(rs.Client(t), "test")
	if _, err := st.Acquire(ctx, []int{3}, "planner-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	src := &status.Source{Store: st, JS: js, Subjects: subjects, ID: "planner-a", Clock: time.Now}

	got, err := src.Status(ctx)
	if err != nil || len(got.Problems) != 0 || got.Partitions != store.DefaultPartitions || len(got.Unowned) != store.DefaultPartitions-1 ||
		got.Collections == nil || *got.Collections != 0 {
		t.Fatalf("status with everything up: %+v, %v", got, err)
	}
	// planner-a holds a lease and beats no heartbeat: a planner standing down, or stopped.
	if len(got.Planners) != 0 || len(got.Leaving) != 1 || got.Leaving[0].ID != "planner-a" || !slices.Equal(got.Leaving[0].Partitions, []int{3}) {
		t.Errorf("planners %+v, leaving %+v: want partition 3 held by planner-a, not live", got.Planners, got.Leaving)
	}
	if len(got.Streams) != 3 || got.Streams[1].Name != subjects.DueStream() || len(got.Streams[1].Consumers) != 1 || got.Streams[1].Consumers[0].Name != "workers" {
		t.Fatalf("streams %+v, want the three with the due stream's consumer", got.Streams)
	}

	rs.Stop()
	down, err := src.Status(ctx)
	if err != nil {
		t.Fatalf("status with Redis down: %v", err)
	}
	if len(down.Problems) == 0 || !strings.Contains(strings.Join(down.Problems, "\n"), "live planners") {
		t.Errorf("problems with Redis down %q, want what was not read named", down.Problems)
	}
	if down.Collections != nil {
		t.Errorf("with Redis down, %d collections counted", *down.Collections)
	}
	if len(down.Streams) != 3 {
		t.Errorf("streams with Redis down %+v, want the three still shown", down.Streams)
	}
	rs.Start()
	back, err := src.Status(ctx)
	if err != nil || len(back.Problems) != 0 {
		t.Errorf("status with Redis back: problems %q, %v", back.Problems, err)
	}
}

// The settings the planners' start warns of are in the status as they stand: a Redis without
// an append-only file, and a due stream that removes its messages after an hour, read or not.
// On a Redis with one, and the streams as the planners make them, there is no warning.
func TestStatusWarnsOfSettingsThatLoseWhatTheyHold(t *testing.T) {
	ctx := context.Background()
	_, js, subjects := natstest.Start(t).JetStream(t)
	source := func(rs *redistest.Server) *status.Source {
		return &status.Source{Store: store.New(rs.Client(t), "test"), JS: js, Subjects: subjects, ID: "planner-a", Clock: time.Now}
	}
	safe, err := source(redistest.Start(t, redistest.WithPersistence())).Status(ctx)
	if err != nil || len(safe.Warnings) != 0 || len(safe.Problems) != 0 {
		t.Fatalf("status of a Redis with an append-only file and the streams as made: warnings %q, problems %q, %v", safe.Warnings, safe.Problems, err)
	}

	natstest.EditStream(t, js, subjects.DueStream(), func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour })
	risky, err := source(redistest.Start(t)).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(risky.Warnings, "\n")
	if len(risky.Warnings) != 2 || !strings.Contains(all, "Redis keeps no append-only file") ||
		!strings.Contains(all, "stream "+subjects.DueStream()+": max age is 1h0m0s") {
		t.Errorf("warnings %q: want the Redis without an append-only file and the due stream's max age named", risky.Warnings)
	}
}

// A collection's change under way is in the status with what it sets and its last step, the
// oldest first; one finished is not. So are the deleted jobs whose messages are still to be
// removed from the due stream.
func TestStatusListsTheCollectionsChangesUnderWay(t *testing.T) {
	ctx := context.Background()
	_, js, subjects := natstest.Start(t).JetStream(t)
	st := store.New(redistest.Start(t).Client(t), "test")
	at := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	for i, c := range []string{"b", "a", "done"} {
		if _, err := st.PutCollection(ctx, c, []byte(`{}`), job.CollectionDisabled, 0, false); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := st.PutJob(ctx, store.PutJob{Collection: c, Name: "j", Definition: []byte(`{}`), Accepted: at,
			Next: at.Add(time.Hour), State: job.StateEnabled, Reaccept: true}); err != nil {
			t.Fatal(err)
		}
		if c == "done" {
			continue
		}
		// An enable's first call: its job is left to schedule, the change under way.
		if _, err := st.SetCollectionState(ctx, c, store.StateChange{State: job.CollectionEnabled, At: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	src := &status.Source{Store: st, JS: js, Subjects: subjects, ID: "planner-a", Clock: time.Now}
	got, err := src.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []bus.ChangeStatus{{Collection: "b", Change: "Enabled", LastStep: at}, {Collection: "a", Change: "Enabled", LastStep: at.Add(time.Second)}}
	if !slices.Equal(got.Changes, want) {
		t.Errorf("changes %+v, want %+v", got.Changes, want)
	}
	if got.Purges != nil {
		t.Errorf("purges %+v before any job's delete", got.Purges)
	}
	// Two jobs deleted, their messages not removed from the due stream (their planner killed
	// between the two): counted, with the oldest delete.
	for i, c := range []string{"done", "a"} {
		if _, ok, err := st.DeleteJob(ctx, c, "j", at.Add(time.Duration(5-i)*time.Second)); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if got, err = src.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if want := (bus.PurgeStatus{Jobs: 2, Oldest: at.Add(4 * time.Second)}); got.Purges == nil || *got.Purges != want {
		t.Errorf("purges %+v, want %+v", got.Purges, want)
	}
}
