package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
)

// fakeStore is a store whose Redis can lose the heartbeat's master or some partitions' masters.
type fakeStore struct {
	mu            sync.Mutex
	partitions    int
	owner         map[int]string
	heartbeatDown bool
	// heartbeatHangs: the heartbeat waits its deadline out, as a call to a lost Redis Cluster
	// master does while the client dials it again and again.
	heartbeatHangs bool
	heartbeatErr   error        // what the heartbeat answers (with the layout refused, say)
	down           map[int]bool // partitions whose master is unreachable
	outages        []store.Outage
	counted        bool // the last heartbeat counts its planner among those sharing the partitions
	renewals       int  // calls of Renew
	// redisAhead is how far Redis's clock is ahead of the planner's (negative: behind).
	redisAhead time.Duration
}

func newFake(partitions int) *fakeStore {
	return &fakeStore{partitions: partitions, owner: map[int]string{}, down: map[int]bool{}}
}

var errDown = errors.New("dial tcp: connection refused")

func (f *fakeStore) Partitions() int { return f.partitions }

func (f *fakeStore) Heartbeat(ctx context.Context, _ string, now, expiry, _, _ time.Time, _ time.Duration, _ int) (store.Beat, error) {
	f.mu.Lock()
	hangs := f.heartbeatHangs
	f.counted = expiry.After(now)
	f.mu.Unlock()
	if hangs {
		<-ctx.Done()
		return store.Beat{}, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.heartbeatDown {
		return store.Beat{}, errDown
	}
	if f.heartbeatErr != nil {
		return store.Beat{}, f.heartbeatErr
	}
	return store.Beat{Live: 1, Outages: slices.Clone(f.outages), Clock: now.Add(f.redisAhead)}, nil
}

func (f *fakeStore) FreePartitions(context.Context) ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var free []int
	for p := range f.partitions {
		if f.owner[p] == "" && !f.down[p] {
			free = append(free, p)
		}
	}
	return free, nil
}

func (f *fakeStore) Acquire(_ context.Context, ps []int, token string, _ time.Duration) ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var got []int
	for _, p := range ps {
		if f.owner[p] == "" && !f.down[p] {
			f.owner[p] = token
			got = append(got, p)
		}
	}
	return got, nil
}

func (f *fakeStore) Renew(ctx context.Context, ps []int, token string, _ time.Duration) (renewed, lost []int, err error) {
	if ctx.Err() != nil { // a real call cannot start past its deadline
		return nil, nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewals++
	for _, p := range ps {
		switch {
		case f.down[p]:
			err = errDown
		case f.owner[p] == token:
			renewed = append(renewed, p)
		default:
			lost = append(lost, p)
		}
	}
	return renewed, lost, err
}

func (f *fakeStore) Release(_ context.Context, p int, token string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner[p] == token {
		delete(f.owner, p)
	}
	return nil
}

func (f *fakeStore) Leave(context.Context, string) error { return nil }

// clock is a test clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

func newLeases(f *fakeStore, c *clock) *Leases {
	return New(Config{Store: f, ID: "a", TTL: 3 * time.Second, Start: c.now.Add(-time.Hour), Clock: c.Now})
}

// A lost heartbeat (the master of the planners' keys gone) does not stop the partitions whose
// leases still renew; a partition whose own master is gone runs out a TTL after its last
// renewal, and only that one.
func TestLeasesStandOnTheirOwn(t *testing.T) {
	ctx := context.Background()
	f, c := newFake(4), &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := newLeases(f, c)
	l.tick(ctx)
	if got := l.Held(); len(got) != 4 {
		t.Fatalf("held %v after the first tick, want all 4", got)
	}
	f.heartbeatDown, f.down[2] = true, true
	for range 4 { // four periods: more than a TTL
		c.advance(time.Second)
		l.tick(ctx)
	}
	if got := l.Held(); !slices.Equal(got, []int{0, 1, 3}) {
		t.Fatalf("held %v with the heartbeat and partition 2 unreachable, want [0 1 3]", got)
	}
	if _, _, ok := l.Use(0); !ok {
		t.Fatal("a held partition cannot be used while the heartbeat fails")
	}
	f.heartbeatDown, f.down[2] = false, false
	delete(f.owner, 2) // it ran out in Redis too
	c.advance(time.Second)
	l.tick(ctx)
	if got := l.Held(); len(got) != 4 {
		t.Fatalf("held %v once Redis is back, want all 4 again", got)
	}
}

// A heartbeat that waits its deadline out (the master of the planners' keys lost, the client
// dialling it again and again) leaves the renewals their own: they shared its deadline, found
// it spent, and every lease ran out, those on the healthy masters too. The TTL is short here
// so that the deadlines waited out are short.
func TestAHangingHeartbeatLeavesTheRenewalsAlone(t *testing.T) {
	ctx := context.Background()
	f, c := newFake(4), &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	const ttl = 30 * time.Millisecond
	l := New(Config{Store: f, ID: "a", TTL: ttl, Start: c.now.Add(-time.Hour), Clock: c.Now})
	l.tick(ctx)
	f.mu.Lock()
	f.heartbeatHangs = true
	f.mu.Unlock()
	for range 4 { // more than a TTL
		c.advance(ttl / 3)
		l.tick(ctx)
	}
	if got := l.Held(); len(got) != 4 {
		t.Fatalf("held %v while the heartbeat hangs, want all 4", got)
	}
}

// A fresh outage on record holds back what fell due by its end until it has stood long enough
// for a planner that lived through it to withdraw it; then it counts. What falls due after it
// is dispatched meanwhile.
func TestAFreshOutageHoldsBackItsOccurrencesUntilItSettles(t *testing.T) {
	ctx := context.Background()
	f, c := newFake(2), &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := newLeases(f, c)
	var logged bytes.Buffer
	l.cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	older := store.Outage{From: c.now.Add(-time.Hour), To: c.now.Add(-50 * time.Minute), Recorded: c.now.Add(-time.Minute)}
	fresh := store.Outage{From: c.now.Add(-time.Minute), To: c.now.Add(-time.Second), Recorded: c.now}
	f.outages = []store.Outage{fresh, older}
	l.tick(ctx)
	done, hold, ok := l.Use(0)
	if want := (store.Hold{DueBy: fresh.To, Until: fresh.Recorded.Add(3 * l.Period())}); !ok || hold != want || len(l.Outages()) != 1 {
		t.Fatalf("while an outage settles: usable %v, hold %+v (want %+v), outages %v (want the settled one)", ok, hold, want, l.Outages())
	}
	done()
	l.tick(ctx)
	if n := strings.Count(logged.String(), "outage on record"); n != 1 || !strings.Contains(logged.String(), "to="+fresh.To.Format("2006-01-02T15:04:05.000Z07:00")) {
		t.Errorf("the settling outage logged %d times, want once with its end:\n%s", n, logged.String())
	}
	c.advance(3 * time.Second)
	l.tick(ctx)
	done, hold, ok = l.Use(0)
	if !ok || hold != (store.Hold{}) || len(l.Outages()) != 2 {
		t.Fatalf("after the settling time: usable %v, hold %+v, outages %v", ok, hold, l.Outages())
	}
	done()
	// Withdrawn before it settled: nothing holds, nothing counts.
	f.outages = []store.Outage{{From: c.now.Add(-time.Minute), To: c.now, Recorded: c.now}}
	l.tick(ctx)
	f.outages = nil
	c.advance(time.Second)
	l.tick(ctx)
	if _, hold, ok := l.Use(0); !ok || hold != (store.Hold{}) || len(l.Outages()) != 0 {
		t.Fatal("a withdrawn outage still holds dispatch back")
	}
}

// Two outages settling hold back what fell due by the later one's end, until the first of
// them settles: the hold is looked at again then, and narrows to the other.
func TestTwoOutagesSettlingHoldUntilTheFirstSettles(t *testing.T) {
	ctx := context.Background()
	f, c := newFake(2), &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := newLeases(f, c)
	first := store.Outage{From: c.now.Add(-time.Hour), To: c.now.Add(-30 * time.Minute), Recorded: c.now.Add(-time.Second)}
	second := store.Outage{From: c.now.Add(-time.Minute), To: c.now.Add(-time.Second), Recorded: c.now}
	f.outages = []store.Outage{second, first}
	l.tick(ctx)
	done, hold, ok := l.Use(0)
	if want := (store.Hold{DueBy: second.To, Until: first.Recorded.Add(3 * l.Period())}); !ok || hold != want {
		t.Fatalf("two outages settling: usable %v, hold %+v, want %+v", ok, hold, want)
	}
	done()
	c.advance(3*l.Period() - time.Second)
	done, hold, _ = l.Use(0)
	done()
	if want := (store.Hold{DueBy: second.To, Until: second.Recorded.Add(3 * l.Period())}); hold != want {
		t.Fatalf("once the first settled: hold %+v, want %+v", hold, want)
	}
}

// A planner that cannot publish (its NATS connection down) renews nothing meanwhile, keeps its
// partitions through a reconnect within the TTL, and lets them go once it has been cut off for
// a TTL: the free ones at once, one whose round is still in hand when its lease runs out. It
// takes none while cut off, and its share again once it can publish.
func TestCutOffFromNATSLetsThePartitionsGo(t *testing.T) {
	ctx := context.Background()
	f, c := newFake(4), &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	publishing := true
	l := New(Config{Store: f, ID: "a", TTL: 3 * time.Second, Start: c.now.Add(-time.Hour), Clock: c.Now,
		Publishing: func() bool { return publishing }})
	l.tick(ctx)
	if got := l.Held(); len(got) != 4 {
		t.Fatalf("held %v after the first tick, want all 4", got)
	}
	publishing = false // a reconnect
	c.advance(time.Second)
	l.tick(ctx)
	publishing = true
	c.advance(time.Second)
	l.tick(ctx)
	if got := l.Held(); len(got) != 4 || f.renewals != 1 {
		t.Fatalf("held %v after a reconnect, renewed %d times; want all 4, renewed once", got, f.renewals)
	}
	publishing = false
	for range 3 { // the cut starts at the first of these ticks: still within a TTL at the third
		c.advance(time.Second)
		l.tick(ctx)
	}
	if got := l.Held(); len(got) != 4 || f.renewals != 1 {
		t.Fatalf("held %v cut off for less than a TTL, renewed %d times; want all 4, not renewed", got, f.renewals)
	}
	c.advance(time.Second)
	done, _, ok := l.Use(1) // a round in hand
	if !ok {
		t.Fatal("partition 1 cannot be used")
	}
	l.tick(ctx)
	done()
	if got := l.Held(); len(got) != 0 {
		t.Fatalf("held %v cut off for a TTL, want none", got)
	}
	if !maps.Equal(f.owner, map[int]string{1: "a"}) {
		t.Fatalf("leases in the store %v, want only partition 1's, whose round was in hand", f.owner)
	}
	if f.counted {
		t.Fatal("the heartbeat counts a planner cut off among those sharing the partitions")
	}
	c.advance(time.Second)
	l.tick(ctx)
	if got := l.Held(); len(got) != 0 {
		t.Fatalf("took %v while cut off", got)
	}
	publishing = true
	c.advance(time.Second)
	l.tick(ctx)
	if got := l.Held(); !slices.Equal(got, []int{0, 2, 3}) || !f.counted {
		t.Fatalf("held %v once publishing again, want the free ones [0 2 3], and counted (%v)", got, f.counted)
	}
}

// A planner whose clock strays from Redis's by more than MaxClockOffset, either way, dispatches
// nothing and lets its partitions go at once, without counting among the live; an offset
// within the bound changes nothing, and once the clocks agree again it takes its share.
func TestAClockAwayFromRedissStandsDown(t *testing.T) {
	ctx := context.Background()
	for _, ahead := range []time.Duration{2 * time.Second, -2 * time.Second} {
		f, c := newFake(4), &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		l := newLeases(f, c)
		f.redisAhead = 400 * time.Millisecond // within the default 500 ms
		l.tick(ctx)
		if off, skewed := l.ClockOffset(); len(l.Held()) != 4 || off != 400*time.Millisecond || skewed {
			t.Fatalf("Redis 400 ms ahead: held %v, offset %v, skewed %v; want all 4, 400ms, false", l.Held(), off, skewed)
		}
		f.redisAhead = ahead
		c.advance(time.Second)
		l.tick(ctx)
		if _, _, ok := l.Use(0); ok {
			t.Fatalf("Redis %v ahead: a partition can be dispatched", ahead)
		}
		c.advance(time.Second)
		l.tick(ctx)
		if off, skewed := l.ClockOffset(); len(l.Held()) != 0 || len(f.owner) != 0 || f.counted || off != ahead || !skewed {
			t.Fatalf("Redis %v ahead: held %v, in the store %v, counted %v, offset %v, skewed %v", ahead, l.Held(), f.owner, f.counted, off, skewed)
		}
		f.redisAhead = 0
		for range 2 { // the first heartbeat finds the clocks agreeing, the next counts again
			c.advance(time.Second)
			l.tick(ctx)
		}
		if got := l.Held(); len(got) != 4 || !f.counted {
			t.Fatalf("clocks agreeing again: held %v, counted %v; want all 4", got, f.counted)
		}
	}
}

// A heartbeat refused while the data moves to another partition count takes no lease, and the
// planner goes on waiting; one refused because the data is laid out with another count than
// the planner's (moved while it started) ends the leases' Run with that error, which stops the
// planner: its partitions are not the data's.
func TestARefusedLayoutTakesNoLeaseAndAMismatchEndsRun(t *testing.T) {
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := newFake(4)
	f.heartbeatErr = fmt.Errorf("heartbeat: %w: moving to 16 partitions", store.ErrRepartitioning)
	l := newLeases(f, c)
	if err := l.tick(context.Background()); err != nil {
		t.Fatalf("a heartbeat refused during a move: %v, want the planner to wait", err)
	}
	if held := l.Held(); len(held) != 0 {
		t.Errorf("held %v during a move, want none", held)
	}
	f.mu.Lock()
	f.heartbeatErr = fmt.Errorf("heartbeat: %w: laid out with 16 partitions", store.ErrLayout)
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Run(ctx); !errors.Is(err, store.ErrLayout) {
		t.Fatalf("Run with the layout refused: %v, want ErrLayout", err)
	}
	if held := l.Held(); len(held) != 0 {
		t.Errorf("held %v, want none", held)
	}
}
