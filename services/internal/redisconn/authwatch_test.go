package redisconn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redisconn"
	"github.com/resched/resched/services/internal/redistest"
)

// The liveness of the credentials: a refusal from the start fails at once; one after Redis let
// the client in fails only past the grace; Redis out of reach never fails it.
func TestAuthWatch(t *testing.T) {
	wrong := errors.New("WRONGPASS invalid username-password pair or user is disabled.")
	down := errors.New("dial tcp 127.0.0.1:6390: connect: connection refused")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var answer error
	w := redisconn.NewAuthWatch(func(context.Context) error { return answer }, time.Minute, func() time.Time { return now })
	live := func() error { return w.Live(context.Background()) }

	answer = down
	if err := live(); err != nil {
		t.Fatalf("Redis out of reach at start: %v", err)
	}
	answer = wrong
	if err := live(); err == nil {
		t.Fatal("credentials never accepted and refused: live")
	}
	answer = nil
	if err := live(); err != nil {
		t.Fatalf("credentials accepted: %v", err)
	}
	answer = wrong // a rotation under way
	if err := live(); err != nil {
		t.Fatalf("refused after being accepted, at once: %v", err)
	}
	now = now.Add(59 * time.Second)
	if err := live(); err != nil {
		t.Fatalf("refused within the grace: %v", err)
	}
	now = now.Add(2 * time.Second)
	if err := live(); err == nil {
		t.Fatal("refused past the grace: live")
	}
	answer = down
	if err := live(); err != nil {
		t.Fatalf("out of reach, no longer refusing: %v", err)
	}
	answer = wrong
	now = now.Add(30 * time.Second)
	if err := live(); err != nil {
		t.Fatalf("refused again, the grace counted from the new refusal: %v", err)
	}
}

// A Redis that hangs (connections open, nothing answered) is not a refusal: Live answers
// within its own second, before the health check's 2 s count it as unanswered.
func TestAuthWatchOfAHungRedisAnswersLive(t *testing.T) {
	rs := redistest.Start(t)
	rdb, err := redisconn.Options{URL: rs.URL()}.Client("test", nil) // as the planner's, held to its deadlines
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	w := redisconn.NewAuthWatch(func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, 0, nil)
	if err := w.Live(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs.Pause()
	t.Cleanup(rs.Resume)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.Live(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("with Redis hung: %v (the check's own deadline: %v)", err, ctx.Err())
	}
}
