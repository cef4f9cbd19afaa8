package dashboard

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/gateway/internal/schedapi"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// planners answers collections.get from a map of collection → scope (absent: 404), counting
// the requests; while gate is set, each request waits for it or for its context.
type planners struct {
	mu       sync.Mutex
	scope    map[string]string
	requests int
	gate     chan struct{}
}

func (p *planners) RequestMsgWithContext(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	p.mu.Lock()
	p.requests++
	gate := p.gate
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	name := msg.Subject[strings.LastIndex(msg.Subject, ".")+1:]
	p.mu.Lock()
	sc, ok := p.scope[name]
	p.mu.Unlock()
	reply := nats.NewMsg(msg.Reply)
	if !ok {
		reply.Header.Set(micro.ErrorCodeHeader, "404")
		reply.Header.Set(micro.ErrorHeader, "not found")
		return reply, nil
	}
	c := job.Collection{Name: name, Tags: map[string]string{}}
	if sc != "" {
		c.Tags[armScopeTag] = sc
	}
	reply.Data, _ = json.Marshal(c)
	return reply, nil
}

func (p *planners) set(collection, scope string, present bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if present {
		p.scope[collection] = scope
	} else {
		delete(p.scope, collection)
	}
}

func (p *planners) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

const (
	teamA = "/subscriptions/s1/resourceGroups/team-a"
	teamB = "/subscriptions/s1/resourceGroups/team-b"
)

// newTestScopes is a scope cache on fake planners and a clock the test moves.
func newTestScopes() (*scopes, *planners, *time.Time) {
	p := &planners{scope: map[string]string{"c1": teamA}}
	s := newScopes(schedapi.Client{NC: p, Subjects: bus.NewSubjects("resched")})
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	return s, p, &now
}

func TestScopesAskThePlannersOnceWhileFresh(t *testing.T) {
	s, p, now := newTestScopes()
	for range 3 {
		if sc, ok := s.of(t.Context(), "c1"); !ok || sc != teamA {
			t.Fatalf("of(c1) = %q, %v; want %q", sc, ok, teamA)
		}
		*now = now.Add(10 * time.Second)
	}
	if n := p.count(); n != 1 {
		t.Fatalf("%d requests for one collection read within %v; want 1", n, scopeFresh)
	}
}

// A stale entry is answered without waiting for the planners (the live messages come in a NATS
// callback), and read again once in the background.
func TestAStaleScopeIsAnsweredAtOnceAndReadAgainInTheBackground(t *testing.T) {
	s, p, now := newTestScopes()
	if _, ok := s.of(t.Context(), "c1"); !ok {
		t.Fatal("c1 not found")
	}
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	p.set("c1", teamB, true) // deleted and made again under another scope
	*now = now.Add(scopeFresh + time.Second)

	// A context already ended: a lookup that asked the planners here would fail.
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for range 5 {
		if sc, ok := s.of(ended, "c1"); !ok || sc != teamA {
			t.Fatalf("stale of(c1) = %q, %v; want the known %q at once", sc, ok, teamA)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the background read to start", func() bool { return p.count() == 2 })
	close(gate)
	testenv.Eventually(t, 10*time.Second, "the new scope", func() bool {
		sc, ok := s.of(ended, "c1")
		return ok && sc == teamB
	})
	if n := p.count(); n != 2 {
		t.Fatalf("%d requests; want 2: one read, one refresh for five stale lookups", n)
	}
}

func TestADeletedCollectionIsForgottenWhenReadAgain(t *testing.T) {
	s, p, now := newTestScopes()
	if _, ok := s.of(t.Context(), "c1"); !ok {
		t.Fatal("c1 not found")
	}
	p.set("c1", "", false)
	*now = now.Add(scopeFresh + time.Second)
	s.of(t.Context(), "c1") // starts the background read
	testenv.Eventually(t, 10*time.Second, "c1 forgotten", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, known := s.m["c1"]
		return !known && !s.refreshing["c1"]
	})
	if sc, ok := s.of(t.Context(), "c1"); ok {
		t.Fatalf("of(deleted c1) = %q, true; want not found", sc)
	}
}

// A refresh that fails for another reason (the planners do not answer) keeps what was known.
func TestAFailedRefreshKeepsTheScope(t *testing.T) {
	s, p, now := newTestScopes()
	s.of(t.Context(), "c1")
	s.timeout = 50 * time.Millisecond
	gate := make(chan struct{}) // never opened: the refresh times out
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	*now = now.Add(scopeFresh + time.Second)
	s.of(t.Context(), "c1")
	refreshed(t, s, "c1")
	if sc, ok := s.of(t.Context(), "c1"); !ok || sc != teamA {
		t.Fatalf("of(c1) after a failed refresh = %q, %v; want %q", sc, ok, teamA)
	}
}

func TestNoLookupWithoutALivePage(t *testing.T) {
	s, p, _ := newTestScopes()
	h := newHub(s)
	h.onResults([]byte(`{"collection":"c1","job":"j1","status":"Completed","actionName":"MainAction","scheduledTime":"2026-11-28T12:00:00Z"}`))
	if n := p.count(); n != 0 {
		t.Fatalf("%d requests for a result with no page open; want 0", n)
	}
	sub := h.subscribe(access.Grant{Scopes: []string{"*"}})
	defer h.unsubscribe(sub)
	h.onResults([]byte(`{"collection":"c1","job":"j1","status":"Completed","actionName":"MainAction","scheduledTime":"2026-11-28T12:00:00Z"}`))
	if n := p.count(); n != 1 {
		t.Fatalf("%d requests with a page open; want 1", n)
	}
	select {
	case m := <-sub.out:
		if !strings.Contains(string(m), `"job":"j1"`) {
			t.Fatalf("live message %s", m)
		}
	default:
		t.Fatal("the open page got no message")
	}
}

// A collection no lookup asks for is forgotten after a while; one in use is kept.
func TestScopesForgetCollectionsNoLongerSeen(t *testing.T) {
	s, p, now := newTestScopes()
	p.set("c2", teamB, true)
	s.of(t.Context(), "c1")
	s.of(t.Context(), "c2")
	for range 12 { // c1 looked up every 30 s (read again in the background), c2 never again
		*now = now.Add(scopeFresh)
		s.of(t.Context(), "c1")
		refreshed(t, s, "c1")
	}
	s.mu.Lock()
	_, c1 := s.m["c1"]
	_, c2 := s.m["c2"]
	s.mu.Unlock()
	if !c1 || c2 {
		t.Fatalf("after %v: c1 (in use) kept %v, c2 (unused) kept %v; want true, false", 12*scopeFresh, c1, c2)
	}
}

// refreshed waits for the background read of a collection's scope to end.
func refreshed(t *testing.T, s *scopes, collection string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "the refresh of "+collection+" to end", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.refreshing[collection]
	})
}
