package action_test

import (
	"context"
	"testing"
	"time"

	"github.com/resched/resched/services/worker/internal/action"
)

func TestBoundedKeepsASoonerDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, done := action.Bounded(parent, time.Hour)
	defer done()
	if ctx != parent {
		t.Fatal("a context ending within the time-out was wrapped again")
	}
}

func TestBoundedShortensALaterDeadline(t *testing.T) {
	later, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for name, parent := range map[string]context.Context{"no deadline": context.Background(), "later deadline": later} {
		before := time.Now()
		ctx, done := action.Bounded(parent, time.Minute)
		end, ok := ctx.Deadline()
		done()
		if !ok || end.Before(before.Add(time.Minute)) || end.After(time.Now().Add(time.Minute)) {
			t.Errorf("%s: deadline %v (set %v), want a minute from the call", name, end, ok)
		}
		if ctx.Err() == nil {
			t.Errorf("%s: the cancel returned did not end the context", name)
		}
	}
}

// A schedule's whole seconds print as the original's header did; a run-now's millisecond is kept,
// so a target never reads a time earlier than the one the job was due at.
func TestExpectedExecutionTime(t *testing.T) {
	cest := time.FixedZone("CEST", 2*3600)
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 3, 1, 11, 30, 0, 0, cest), "2026-03-01T09:30:00Z"},
		{time.Date(2026, 3, 1, 9, 30, 0, 250*int(time.Millisecond), time.UTC), "2026-03-01T09:30:00.25Z"},
		{time.Date(2026, 3, 1, 9, 30, 0, 7*int(time.Millisecond), time.UTC), "2026-03-01T09:30:00.007Z"},
	} {
		if got := (action.Meta{Scheduled: c.at}).ExpectedExecutionTime(); got != c.want {
			t.Errorf("%v: %q, want %q", c.at, got, c.want)
		}
	}
}
