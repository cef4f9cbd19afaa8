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
