package redisconn

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultAuthGrace is how long a planner that Redis let in keeps trying credentials Redis now
// refuses before its liveness fails: a password rotated in Redis before the planner's Secret
// (or the other way round) is ridden through; one that stays wrong gets the process restarted,
// and it reads its Secret again. As natsconn.DefaultAuthGrace for NATS.
const DefaultAuthGrace = 2 * time.Minute

// AuthWatch turns Redis refusing the client's credentials into a liveness failure. Only a
// refusal counts: Redis down or out of reach is not the process's to fix by a restart.
// Without it, a planner whose Redis password was rotated kept its old one for good: its pooled
// connections worked until they closed, every new one was refused (WRONGPASS), and only its
// readiness said so, which restarts nothing.
type AuthWatch struct {
	ping     func(context.Context) error
	grace    time.Duration
	clock    func() time.Time
	accepted atomic.Bool  // Redis answered once
	since    atomic.Int64 // when its refusals began (unix ns); 0: it does not refuse
}

// NewAuthWatch watches the credentials through ping (a PING of every master); grace 0 is
// DefaultAuthGrace, clock nil time.Now.
func NewAuthWatch(ping func(context.Context) error, grace time.Duration, clock func() time.Time) *AuthWatch {
	if grace <= 0 {
		grace = DefaultAuthGrace
	}
	if clock == nil {
		clock = time.Now
	}
	return &AuthWatch{ping: ping, grace: grace, clock: clock}
}

// pingWait bounds Live's ping, well within the health check's 2 s: a Redis that hangs must
// give Live its answer (not a refusal) before the check is counted as unanswered, which would
// fail liveness and restart the planners of a Redis in trouble.
const pingWait = time.Second

// Live pings Redis. It fails when Redis refuses the credentials and never accepted them (a
// wrong configuration: at once), or has refused them for longer than the grace.
func (w *AuthWatch) Live(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, pingWait)
	err := w.ping(pctx)
	cancel()
	now := w.clock()
	if !IsAuthError(err) {
		if err == nil {
			w.accepted.Store(true)
		}
		w.since.Store(0)
		return nil
	}
	w.since.CompareAndSwap(0, now.UnixNano())
	switch refused := now.Sub(time.Unix(0, w.since.Load())); {
	case !w.accepted.Load():
		return fmt.Errorf("Redis refuses the credentials: %w", err)
	case refused > w.grace:
		return fmt.Errorf("Redis has refused the credentials for %v, more than %v: %w", refused.Round(time.Second), w.grace, err)
	}
	return nil
}

// IsAuthError reports whether err is Redis refusing the client's credentials: a wrong password
// or user (WRONGPASS), or none given where one is required (NOAUTH).
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "WRONGPASS") || strings.Contains(s, "NOAUTH")
}
