// Package leasetest holds every partition for tests that drive a dispatcher step by step
// (Dispatcher.DispatchOnce, their own clock): the leases are taken in Redis, so the fenced
// scripts accept them, and never renewed or given up. Tests of the real loop use package
// lease.
package leasetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
)

// Token is the lease holder's value.
const Token = "leasetest"

// All holds every partition of a store. It implements dispatch.Leases.
type All struct {
	mu      sync.Mutex
	outages []store.Outage
	hold    store.Hold
}

// HoldAll takes the lease of every partition of s for the rest of the test.
func HoldAll(t testing.TB, s *store.Store) *All {
	t.Helper()
	parts := make([]int, s.Partitions())
	for p := range parts {
		parts[p] = p
	}
	if _, err := s.Acquire(context.Background(), parts, Token, time.Hour); err != nil {
		t.Fatalf("leasetest: %v", err)
	}
	return &All{}
}

// Release gives every lease up, for a test that goes on with real planners.
func (a *All) Release(t testing.TB, s *store.Store) {
	t.Helper()
	for p := range s.Partitions() {
		if err := s.Release(context.Background(), p, Token); err != nil {
			t.Fatalf("leasetest: %v", err)
		}
	}
}

// SetOutages sets the intervals in which no planner ran, as a heartbeat would report them.
func (a *All) SetOutages(o ...store.Outage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outages = o
}

func (a *All) Use(int) (func(), store.Hold, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return func() {}, a.hold, true
}

// HoldBack keeps the occurrences due by t from being dispatched (zero: none), as an outage
// still settling does.
func (a *All) HoldBack(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold = store.Hold{DueBy: t}
}

func (a *All) Lost(int)      {}
func (a *All) Token() string { return Token }

func (a *All) Outages() []store.Outage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.outages
}
