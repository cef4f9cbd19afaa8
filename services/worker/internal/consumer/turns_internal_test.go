package consumer

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeMsg is a due message told apart by its subject; the turns never call it.
type fakeMsg struct {
	jetstream.Msg
	subject string
}

// The turns of one collection: up to its limit at once, then held in order, up to the most
// held; over that, delivered anyway. A delivery that ends passes its turn to the next held of
// its collection, and a stop returns every message still held.
func TestTurns(t *testing.T) {
	tr := newTurns(1, 2)
	keep := func(jetstream.Msg) *beat { return nil }
	admit := func(c, name string) int { return tr.admit(c, fakeMsg{subject: name}, keep) }
	if n := admit("a", "a1"); n != 0 {
		t.Fatalf("first of a: waiting %d, want it delivered", n)
	}
	if n := admit("a", "a2"); n != 1 {
		t.Fatalf("second of a: waiting %d, want 1", n)
	}
	if n := admit("b", "b1"); n != 0 {
		t.Fatalf("first of b: waiting %d, want it delivered", n)
	}
	if n := admit("a", "a3"); n != 2 {
		t.Fatalf("third of a: waiting %d, want 2", n)
	}
	if n := admit("a", "a4"); n != 0 || tr.waiting() != 2 {
		t.Fatalf("fourth of a, two held: waiting %d (%d held), want it delivered over the limit", n, tr.waiting())
	}
	next, ok := tr.done("a")
	if !ok || next.msg.(fakeMsg).subject != "a2" {
		t.Fatalf("after a delivery of a: %v %v, want a2", next.msg, ok)
	}
	if _, ok := tr.done("b"); ok || tr.active["b"] != 0 {
		t.Fatalf("after b's only delivery: a message, or b still counted %d", tr.active["b"])
	}
	if held := tr.close(); len(held) != 1 || held[0].msg.(fakeMsg).subject != "a3" || tr.waiting() != 0 {
		t.Fatalf("at the stop: %v held, %d counted; want a3", held, tr.waiting())
	}
	if _, ok := tr.done("a"); ok {
		t.Fatal("after the stop, a held message was given a turn")
	}
	if n := admit("a", "a5"); n != 0 {
		t.Fatalf("after the stop: waiting %d, want it delivered (fetched, so this worker's)", n)
	}
}

// Without a limit nothing is counted or held.
func TestNoTurns(t *testing.T) {
	tr := newTurns(0, 10)
	for range 3 {
		if n := tr.admit("a", nil, nil); n != 0 {
			t.Fatalf("waiting %d, want none without a limit", n)
		}
	}
	if _, ok := tr.done("a"); ok || len(tr.active) != 0 {
		t.Fatalf("counted %v without a limit", tr.active)
	}
}

// The cost a delivery pays for its collection's limit: its turn taken and given back, on 100
// collections.
func BenchmarkTurns(b *testing.B) {
	tr := newTurns(8, 1000)
	names := make([]string, 100)
	for i := range names {
		names[i] = "team-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := names[i%len(names)]
		i++
		tr.admit(c, nil, nil)
		tr.done(c)
	}
}
