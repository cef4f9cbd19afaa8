package main

import (
	"context"
	"crypto/x509"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/resched/resched/services/internal/reload"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// targetTrust delivers with deliverers built for the target CAs as their file holds them, and
// builds them again when the file changes (a private CA renewed, a bundle that trust-manager or
// a Secret refreshes), at most a second later: crypto/tls reads a configuration's CAs once,
// and each deliverer keeps its clients and their connections for the CAs it was built with.
// The deliverers replaced keep their connections for an attempt's time-out, for the attempts
// under way on them, then close.
type targetTrust struct {
	cas     *reload.Value[*x509.CertPool]
	build   func(*x509.CertPool) (action.Registry, func(context.Context), error)
	grace   time.Duration
	now     func() time.Time
	later   func(time.Duration, func()) // time.AfterFunc; tests call at once
	log     *slog.Logger
	checked atomic.Int64 // when the file was last looked at, Unix nanoseconds
	cur     atomic.Pointer[trusted]
}

// trusted is the deliverers built for one pool of CAs.
type trusted struct {
	pool  *x509.CertPool
	reg   action.Registry
	close func(context.Context)
}

// checkEvery is how often a delivery looks at the CA file (a stat): not at every delivery.
const checkEvery = time.Second

func newTargetTrust(cas *reload.Value[*x509.CertPool], build func(*x509.CertPool) (action.Registry, func(context.Context), error),
	attemptTimeout time.Duration, now func() time.Time, logger *slog.Logger) (*targetTrust, error) {
	t := &targetTrust{cas: cas, build: build, grace: attemptTimeout + 5*time.Second, now: now, log: logger,
		later: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
	pool := cas.Get()
	reg, closeFn, err := build(pool)
	if err != nil {
		return nil, err
	}
	t.cur.Store(&trusted{pool: pool, reg: reg, close: closeFn})
	t.checked.Store(now().UnixNano())
	return t, nil
}

// Deliver delivers with the deliverers of the CAs the file holds.
func (t *targetTrust) Deliver(ctx context.Context, a *job.ActionSpec, m action.Meta) (string, error) {
	t.refresh()
	return t.cur.Load().reg.Deliver(ctx, a, m)
}

// refresh builds the deliverers again when the CA file was read again, looking at most once a
// checkEvery; one delivery looks, the others go on meanwhile.
func (t *targetTrust) refresh() {
	now, last := t.now().UnixNano(), t.checked.Load()
	if now-last < int64(checkEvery) || !t.checked.CompareAndSwap(last, now) {
		return
	}
	old := t.cur.Load()
	pool := t.cas.Get() // the same pool while the file is unchanged, or unreadable
	if pool == old.pool {
		return
	}
	reg, closeFn, err := t.build(pool)
	if err != nil {
		t.log.Warn("the target CA file changed, and the deliverers could not be built for it; the CAs read before stay", "error", err)
		return
	}
	t.cur.Store(&trusted{pool: pool, reg: reg, close: closeFn})
	t.later(t.grace, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		old.close(ctx)
	})
}

// close releases the connections of the deliverers in use.
func (t *targetTrust) close(ctx context.Context) { t.cur.Load().close(ctx) }
