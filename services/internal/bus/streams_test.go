package bus_test

import (
	"context"
	"fmt"
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

// A stream whose largest message an operator set below what a definition or a result needs
// is left as it is, and the start says so: its occurrences or results would be refused.
func TestEnsureStreamsNotesALargestMessageTooSmall(t *testing.T) {
	ctx := context.Background()
	_, js, subjects := natstest.Start(t).JetStream(t) // the streams as created
	for name, size := range map[string]int32{subjects.DueStream(): 4096, subjects.ResultsStream(): 64 << 10, subjects.IntakeStream(): 16 << 10} {
		natstest.SetMaxMsgSize(t, js, name, size)
	}
	notes, err := bus.EnsureStreams(ctx, js, subjects, bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range notes {
		got[n.Stream+" "+n.Setting] = n.Has
	}
	want := map[string]string{subjects.DueStream() + " max message size": "4096", subjects.IntakeStream() + " max message size": "16384"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("notes %v, want %v (64 KiB holds a result)", got, want)
	}
}
