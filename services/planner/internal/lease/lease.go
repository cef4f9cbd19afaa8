// Package lease shares the partitions of the due set among the live planners. Each planner
// beats a heartbeat into Redis every period, holds the leases of about its fair share of the
// partitions (partitions ÷ live planners), renews them every period and gives up what it holds
// beyond its share, so a planner that joins gets work within a few periods and the partitions
// of one that dies are taken over once their leases run out (the TTL, a few seconds). The
// scripts that move jobs check the lease (fencing), so a planner that lost one, paused or cut
// off, can publish at most a duplicate (dropped by JetStream) and never move a job.
//
// The heartbeats also record when no planner ran at all (store.Heartbeat): the dispatcher fires
// every occurrence that a live planner was merely late with, and applies the catch-up policy
// only to those that fell due while every planner was down (docs/architecture.md).
package lease

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
)

// Store is what the leases need of the planner's store.
type Store interface {
	Partitions() int
	Heartbeat(ctx context.Context, id string, now, expiry, processStart, prev time.Time, period time.Duration, keep int) (store.Beat, error)
	FreePartitions(ctx context.Context) ([]int, error)
	Acquire(ctx context.Context, partitions []int, token string, ttl time.Duration) ([]int, error)
	Renew(ctx context.Context, partitions []int, token string, ttl time.Duration) (renewed, lost []int, err error)
	Release(ctx context.Context, p int, token string) error
	Leave(ctx context.Context, id string) error
}

// Metrics records what the leases do; package metrics has the Prometheus one.
type Metrics interface {
	Leases(held, planners int)
	ClockOffset(d time.Duration)
	Error(stage string)
}

// Config gathers the leases' dependencies and settings.
type Config struct {
	Store  Store
	ID     string        // this planner, unique among the live ones; also its lease token
	TTL    time.Duration // how long a lease lasts without renewal; default 3 s
	Start  time.Time     // when this planner's process started (outage detection)
	Clock  func() time.Time
	Logger *slog.Logger
	// Metrics may be nil.
	Metrics Metrics
	// Acquired is called for each partition this planner takes (to wake its dispatcher).
	Acquired func(p int)
	// Publishing reports whether this planner can publish occurrences now (its NATS
	// connection is up); nil means always. Cut off for a TTL, it lets its leases go, so that
	// a planner that can publish takes its partitions rather than their jobs waiting for it.
	Publishing func() bool
	// MaxClockOffset is how far this planner's clock may stray from Redis's, the clock every
	// planner shares, before it stops dispatching and lets its leases go: a clock ahead fires
	// early, one behind late. Default 500 ms.
	MaxClockOffset time.Duration
}

// outagesKept bounds the outages on record; older ones no longer matter once they are more
// than the catch-up window ago.
const outagesKept = 100

// settlePeriods is how many periods an outage must stand on record before it counts: long
// enough for a planner that lived through the gap, cut off from Redis, to beat again and
// remove it (store.Heartbeat), its Redis client having found the new master meanwhile.
const settlePeriods = 3

// Leases holds this planner's partition leases. Its methods are safe for concurrent use.
type Leases struct {
	cfg    Config
	period time.Duration
	parts  []partition
	// outages is the last heartbeat's answer.
	outages atomic.Pointer[[]store.Outage]
	beaten  atomic.Bool
	// lastBeat is when this planner's heartbeat last succeeded (unix ns; 0 before the first).
	lastBeat atomic.Int64
	// cutSince is when Publishing last turned false (unix ns; 0 while it holds). Only tick
	// reads and writes it.
	cutSince int64
	// offset is how far Redis's clock was ahead of this planner's at the last heartbeat (ns,
	// negative when behind; 0 within the round trip); skewed says it was beyond MaxClockOffset.
	offset atomic.Int64
	skewed atomic.Bool
	// noted is when the newest outage this planner has logged was recorded. Only tick reads
	// and writes it.
	noted time.Time
}

// partition is this planner's view of one partition's lease.
type partition struct {
	held atomic.Bool
	// renewed is when the lease was last taken or renewed (unix ns): it runs out a TTL later.
	renewed atomic.Int64
	// mu is held through a dispatch round, so a lease is given up only between rounds.
	mu sync.Mutex
}

// New returns the leases; Run takes and keeps them.
func New(cfg Config) *Leases {
	if cfg.TTL <= 0 {
		cfg.TTL = 3 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Acquired == nil {
		cfg.Acquired = func(int) {}
	}
	if cfg.Publishing == nil {
		cfg.Publishing = func() bool { return true }
	}
	if cfg.MaxClockOffset <= 0 {
		cfg.MaxClockOffset = 500 * time.Millisecond
	}
	l := &Leases{cfg: cfg, period: cfg.TTL / 3, parts: make([]partition, cfg.Store.Partitions())}
	l.outages.Store(&[]store.Outage{})
	return l
}

// Token is the value this planner's leases hold in Redis.
func (l *Leases) Token() string { return l.cfg.ID }

// Period is how often the leases are renewed and the heartbeat beats.
func (l *Leases) Period() time.Duration { return l.period }

// Use starts a dispatch round on partition p: ok is false when this planner does not hold it;
// otherwise done must be called when the round ends. A lease is never given up during a round.
// The occurrences hold keeps (zero: none) may not be dispatched yet: those due by the end of
// an outage still settling wait until it settles, when the catch-up policy can tell what they
// are. The later ones are no outage's, so a job put just after every planner was restarted
// fires on time.
func (l *Leases) Use(p int) (done func(), hold store.Hold, ok bool) {
	pt := &l.parts[p]
	if !pt.held.Load() || l.skewed.Load() {
		return nil, store.Hold{}, false
	}
	pt.mu.Lock()
	if !pt.held.Load() {
		pt.mu.Unlock()
		return nil, store.Hold{}, false
	}
	return pt.mu.Unlock, l.settling(), true
}

// Lost records that a script found the lease of p held by another planner.
func (l *Leases) Lost(p int) {
	if l.parts[p].held.CompareAndSwap(true, false) {
		l.cfg.Logger.Warn("partition lease lost", "partition", p)
	}
}

// Holds reports whether this planner holds the lease of p now (it may lose it at the next
// renewal, as for Use).
func (l *Leases) Holds(p int) bool {
	return p >= 0 && p < len(l.parts) && l.parts[p].held.Load()
}

// Held lists the partitions this planner holds.
func (l *Leases) Held() []int {
	var out []int
	for p := range l.parts {
		if l.parts[p].held.Load() {
			out = append(out, p)
		}
	}
	return out
}

// Outages returns the intervals in which no planner ran, newest first, as of the last
// heartbeat: those on record for at least the settling time.
func (l *Leases) Outages() []store.Outage {
	all := *l.outages.Load()
	settled := make([]store.Outage, 0, len(all))
	for _, o := range all {
		if !l.unsettled(o) {
			settled = append(settled, o)
		}
	}
	return settled
}

func (l *Leases) unsettled(o store.Outage) bool {
	return !o.Recorded.IsZero() && l.cfg.Clock().Before(l.settles(o))
}

// settles is when outage o, on record since o.Recorded, counts.
func (l *Leases) settles(o store.Outage) time.Time { return o.Recorded.Add(settlePeriods * l.period) }

// note logs each outage once, while it settles (outages is newest first): an operator sees
// when no planner ran, and when what fell due meanwhile goes to the catch-up policy.
func (l *Leases) note(outages []store.Outage) {
	for i := len(outages) - 1; i >= 0; i-- {
		o := outages[i]
		if !l.unsettled(o) || !o.Recorded.After(l.noted) {
			continue
		}
		l.noted = o.Recorded
		l.cfg.Logger.Info("outage on record: no planner ran; what fell due in it waits, then follows the catch-up policy",
			"from", o.From.UTC(), "to", o.To.UTC(), "waits_until", l.settles(o).UTC())
	}
}

// settling returns the hold of the outages recorded too recently to tell yet whether a planner
// lived through them: what fell due by the latest end of one is not dispatched until the first
// of them settles, so that nothing fires or is skipped on an outage about to be withdrawn.
func (l *Leases) settling() store.Hold {
	var h store.Hold
	for _, o := range *l.outages.Load() {
		if !l.unsettled(o) {
			continue
		}
		if o.To.After(h.DueBy) {
			h.DueBy = o.To
		}
		if h.Until.IsZero() || l.settles(o).Before(h.Until) {
			h.Until = l.settles(o)
		}
	}
	return h
}

// Ready reports whether the first heartbeat has been recorded.
func (l *Leases) Ready() bool { return l.beaten.Load() }

// ClockOffset is how far Redis's clock was ahead of this planner's at the last heartbeat
// (negative: behind), and whether that is more than MaxClockOffset.
func (l *Leases) ClockOffset() (time.Duration, bool) {
	return time.Duration(l.offset.Load()), l.skewed.Load()
}

// Run keeps the heartbeat and the leases until ctx ends. It keeps them in Redis then: a clean
// stop calls Leave once the dispatcher has stopped, so the others take over at once; a planner
// that dies leaves them to run out.
func (l *Leases) Run(ctx context.Context) error {
	t := time.NewTicker(l.period)
	defer t.Stop()
	for {
		if err := l.tick(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tick beats the heartbeat, renews what is held and moves towards the fair share. Each lease
// stands on its own: a partition whose renewal fails (its Redis master lost) runs out a TTL
// after its last renewal, while the others go on; a failed heartbeat only stops this planner
// from taking more. A planner cut off from NATS for a TTL, or whose clock strays from Redis's,
// takes and keeps nothing. A planner whose partition count is not the data's (moved to
// another meanwhile, planner -repartition) must not run on: its error ends Run.
func (l *Leases) tick(parent context.Context) error {
	now := l.cfg.Clock()
	cut := l.keep(parent, now)
	ctx, cancel := context.WithTimeout(parent, l.period)
	defer cancel()
	var prev time.Time
	if ns := l.lastBeat.Load(); ns != 0 {
		prev = time.Unix(0, ns)
	}
	// A planner standing down still beats, so that no outage is recorded while it runs, but
	// with an expiry already past: it does not count among the planners that share the
	// partitions, so the others take its share too.
	expiry := now.Add(l.cfg.TTL)
	if cut {
		expiry = now.Add(-l.cfg.TTL)
	}
	sent := l.cfg.Clock()
	beat, hbErr := l.cfg.Store.Heartbeat(ctx, l.cfg.ID, now, expiry, l.cfg.Start, prev, l.period, outagesKept)
	if hbErr != nil {
		l.fail("heartbeat", hbErr)
		if errors.Is(hbErr, store.ErrLayout) {
			return hbErr
		}
		return nil
	}
	l.outages.Store(&beat.Outages)
	l.note(beat.Outages)
	l.lastBeat.Store(now.UnixNano())
	l.beaten.Store(true)
	l.compareClocks(beat.Clock, sent, l.cfg.Clock())
	if !cut && !l.skewed.Load() {
		l.balance(ctx, beat.Live)
	}
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.Leases(len(l.Held()), beat.Live)
	}
	return nil
}

// keep renews the held leases, or lets them go, and reports whether this planner stands down.
// The renewal goes first in a tick, with a deadline of its own: a heartbeat whose Redis master
// is lost waits its deadline out, and a renewal sharing it then failed for every lease, those on
// the healthy masters too, so that all of them ran out in a failover. A planner that cannot
// publish renews nothing: a NATS reconnect within the TTL keeps its leases, and a cut that
// lasts has them run out as it is found, rather than a TTL later. One whose clock strays from
// Redis's lets them go at once.
func (l *Leases) keep(parent context.Context, now time.Time) bool {
	ctx, cancel := context.WithTimeout(parent, l.period)
	defer cancel()
	cut := l.cutOff(now)
	switch {
	case l.skewed.Load():
		l.standDown(ctx, "its clock strays from Redis's")
		return true
	case cut:
		l.standDown(ctx, "it cannot publish to NATS")
		return true
	case l.cutSince == 0:
		l.renew(ctx, now)
	}
	return false
}

// balance moves towards the fair share of live planners: it takes free partitions up to it,
// and gives up what it holds beyond it.
func (l *Leases) balance(ctx context.Context, live int) {
	held := l.Held()
	share := (len(l.parts) + live - 1) / max(live, 1)
	switch {
	case len(held) < share:
		l.acquire(ctx, share-len(held))
	case len(held) > share:
		l.giveUp(ctx, held, len(held)-share)
	}
}

// compareClocks sets the offset of Redis's clock, read between sent and received by this
// planner's: zero when it falls within the round trip, so a slow answer is no offset.
func (l *Leases) compareClocks(redis, sent, received time.Time) {
	var off time.Duration
	switch {
	case redis.Before(sent):
		off = redis.Sub(sent)
	case redis.After(received):
		off = redis.Sub(received)
	}
	l.offset.Store(int64(off))
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.ClockOffset(off)
	}
	skewed := off.Abs() > l.cfg.MaxClockOffset
	switch {
	case skewed && !l.skewed.Load():
		l.cfg.Logger.Error("this planner's clock differs from Redis's, the clock every planner shares: it dispatches nothing and lets its partitions go until they agree (synchronise the machines' clocks, NTP)",
			"redis_ahead_by", off, "max", l.cfg.MaxClockOffset)
	case !skewed && l.skewed.Load():
		l.cfg.Logger.Info("this planner's clock agrees with Redis's again", "redis_ahead_by", off)
	}
	l.skewed.Store(skewed)
}

// cutOff reports whether this planner has been unable to publish for a TTL: as long as a
// NATS reconnect takes, or a restart of its server, it keeps its partitions.
func (l *Leases) cutOff(now time.Time) bool {
	if l.cfg.Publishing() {
		if l.cutSince != 0 && now.Sub(time.Unix(0, l.cutSince)) >= l.cfg.TTL {
			l.cfg.Logger.Info("partition leases: publishing again; taking a share of the partitions")
		}
		l.cutSince = 0
		return false
	}
	if l.cutSince == 0 {
		l.cutSince = now.UnixNano()
	}
	return now.Sub(time.Unix(0, l.cutSince)) >= l.cfg.TTL
}

// standDown lets every held lease go without waiting for the rounds in hand: a lease whose
// round still runs is not released but left to run out, a TTL after its last renewal. Another
// planner takes each partition once it is free, and its share once this one no longer counts
// among the live (tick).
func (l *Leases) standDown(ctx context.Context, why string) {
	held := l.Held()
	if len(held) == 0 {
		return
	}
	l.cfg.Logger.Warn("partition leases: letting the partitions go to the other planners, since "+why,
		"partitions", len(held))
	for _, p := range held {
		l.release(ctx, p, false)
	}
}

// renew extends the held leases, and drops those renewed too long ago to be still held.
func (l *Leases) renew(ctx context.Context, now time.Time) {
	held := l.Held()
	if len(held) == 0 {
		return
	}
	renewed, lost, err := l.cfg.Store.Renew(ctx, held, l.cfg.ID, l.cfg.TTL)
	if err != nil {
		l.fail("renew", err)
	}
	for _, p := range renewed {
		l.parts[p].renewed.Store(now.UnixNano())
	}
	for _, p := range lost {
		l.Lost(p)
	}
	for _, p := range l.Held() {
		if now.Sub(time.Unix(0, l.parts[p].renewed.Load())) >= l.cfg.TTL {
			l.Lost(p) // Redis has not renewed it for a whole TTL: it has run out
		}
	}
}

// acquire takes up to n free partitions, in this planner's own order of preference, so that
// planners starting together reach for different ones.
func (l *Leases) acquire(ctx context.Context, n int) {
	// Each partition on its own: those on a Redis Cluster master that is lost are not read or
	// taken, the others are.
	free, err := l.cfg.Store.FreePartitions(ctx)
	if err != nil {
		l.fail("acquire", err)
	}
	l.prefer(free)
	now := l.cfg.Clock().UnixNano() // before the leases are set: they run out a TTL after this at the latest
	got, err := l.cfg.Store.Acquire(ctx, free[:min(n, len(free))], l.cfg.ID, l.cfg.TTL)
	if err != nil {
		l.fail("acquire", err)
	}
	for _, p := range got {
		l.parts[p].renewed.Store(now)
		l.parts[p].held.Store(true)
		l.cfg.Acquired(p)
	}
	if len(got) > 0 { // one line, not one per partition: a planner starting alone takes them all
		l.cfg.Logger.Info("partition leases acquired", "partitions", got)
	}
}

// giveUp releases n of the held partitions, the least preferred first, each once its round in
// hand has ended.
func (l *Leases) giveUp(ctx context.Context, held []int, n int) {
	l.prefer(held)
	given := held[len(held)-n:]
	for _, p := range given {
		l.release(ctx, p, true)
	}
	if len(given) > 0 {
		l.cfg.Logger.Info("partition leases given up for another planner", "partitions", given)
	}
}

// release gives the lease of p up: once its round in hand has ended (wait), or only when no
// round is in hand, leaving one in hand its lease to run out.
func (l *Leases) release(ctx context.Context, p int, wait bool) {
	pt := &l.parts[p]
	pt.held.Store(false)
	if wait {
		pt.mu.Lock()
	} else if !pt.mu.TryLock() {
		return
	}
	defer pt.mu.Unlock()
	if err := l.cfg.Store.Release(ctx, p, l.cfg.ID); err != nil {
		l.fail("release", err)
	}
}

// Leave gives every lease up (waiting for the rounds in hand) and leaves the live set, at a
// clean stop.
func (l *Leases) Leave(ctx context.Context) {
	for _, p := range l.Held() {
		l.release(ctx, p, true)
	}
	if err := l.cfg.Store.Leave(ctx, l.cfg.ID); err != nil {
		l.fail("leave", err)
	}
}

// prefer orders partitions by this planner's preference: a hash of the planner and the
// partition (rendezvous hashing), so each planner prefers a different set.
func (l *Leases) prefer(ps []int) {
	weight := func(p int) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(l.cfg.ID))
		_, _ = h.Write([]byte{byte(p), byte(p >> 8)})
		return h.Sum64()
	}
	slices.SortFunc(ps, func(a, b int) int {
		wa, wb := weight(a), weight(b)
		switch {
		case wa > wb:
			return -1
		case wa < wb:
			return 1
		}
		return a - b
	})
}

func (l *Leases) fail(stage string, err error) {
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.Error("lease_" + stage)
	}
	l.cfg.Logger.Warn("partition leases: "+stage+" failed", "error", err)
}
