package natsconn

import (
	"context"
	"slices"
	"testing"
)

// The moves WatchJetStream makes for a run of probe answers: three unanswered move a
// connection; after a move, an election's answers (no leader, no answer) on the new server
// too wait three times as long, while a leader cut off from its replicas moves it at once.
func TestWatchMovesOnceThroughAnElection(t *testing.T) {
	for _, c := range []struct {
		name    string
		answers []error
		moves   []int // the probes (from 1) after which the connection moves
	}{
		{"answered", []error{nil, nil, nil, nil}, nil},
		{"unanswered", repeat(context.DeadlineExceeded, 3), []int{3}},
		{"an election seen on two servers", repeat(errNoLeader, 12), []int{3, 12}},
		{"a leader cut off on the second", append(repeat(errNoLeader, 3), repeat(errNoQuorum, 3)...), []int{3, 6}},
		{"cut off, then an election on the new server", append(repeat(errNoQuorum, 3), repeat(context.DeadlineExceeded, 9)...), []int{3, 12}},
		{"an answer ends the rest", append(append(repeat(errNoLeader, 3), nil), repeat(errNoLeader, 3)...), []int{3, 7}},
		{"an answer breaks the count", []error{errNoLeader, errNoLeader, nil, errNoLeader, errNoLeader}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w watch
			var moves []int
			for i, err := range c.answers {
				if w.after(err) {
					moves = append(moves, i+1)
					w.moved()
				}
			}
			if !slices.Equal(moves, c.moves) {
				t.Fatalf("moved after probes %v, want %v", moves, c.moves)
			}
		})
	}
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
