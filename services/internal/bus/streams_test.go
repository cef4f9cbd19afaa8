package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
)

// The streams are created when missing; an operator's later edit survives every start, and the
// start says what differs from its settings.
func TestEnsureStreamsKeepsAnOperatorsEdits(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	subjects := bus.NewSubjects("")
	if notes, err := bus.EnsureStreams(ctx, js, subjects, bus.StreamOptions{}); err != nil || len(notes) != 0 {
		t.Fatalf("first start: %v %v", notes, err)
	}
	st, err := js.Stream(ctx, subjects.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	edited := st.CachedInfo().Config
	edited.MaxBytes, edited.Duplicates = 1<<30, 2*time.Minute // nats stream edit
	if _, err := js.UpdateStream(ctx, edited); err != nil {
		t.Fatal(err)
	}
	notes, err := bus.EnsureStreams(ctx, js, subjects, bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0].Stream != subjects.DueStream() || notes[0].Setting != "duplicate window" {
		t.Errorf("notes %+v, want the due stream's duplicate window", notes)
	}
	st, _ = js.Stream(ctx, subjects.DueStream())
	if got := st.CachedInfo().Config; got.MaxBytes != 1<<30 || got.Duplicates != 2*time.Minute {
		t.Errorf("the edit was undone: max bytes %d, duplicates %v", got.MaxBytes, got.Duplicates)
	}
}
