package dashboard

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/gateway/internal/schedapi"
	"github.com/resched/resched/shared/job"
)

// The tags in which the ARM surface keeps a collection's scope and name (arm/scope.go).
const (
	armScopeTag = "resched.armScope"
	armNameTag  = "resched.armName"
)

// collectionInfo is what the dashboard shows of a collection besides its definition.
type collectionInfo struct {
	Name     string `json:"name"`               // the planners' name
	Display  string `json:"display"`            // the ARM name, or the planners' name
	Scope    string `json:"scope,omitempty"`    // /subscriptions/<s>/resourceGroups/<rg>, for ARM collections
	State    string `json:"state"`              // Enabled, Disabled, …
	Sku      string `json:"sku,omitempty"`      // the plan
	MaxJobs  int    `json:"maxJobs,omitempty"`  // the quota, 0 for none
	JobCount int    `json:"jobCount"`           // jobs it holds
	Location string `json:"location,omitempty"` //
}

func infoOf(c job.Collection) collectionInfo {
	in := collectionInfo{Name: c.Name, Display: c.Name, State: string(c.Properties.State), Location: c.Location}
	if n := c.Tags[armNameTag]; n != "" {
		in.Display, in.Scope = n, c.Tags[armScopeTag]
	}
	if c.Properties.Sku != nil {
		in.Sku = string(c.Properties.Sku.Name)
	}
	if q := c.Properties.Quota; q != nil {
		in.MaxJobs = q.MaxJobCount
	}
	if c.JobCount != nil {
		in.JobCount = *c.JobCount
	}
	return in
}

// visible reports whether a grant covers a collection: an ARM collection by its scope; one
// made on NATS (no scope) only by a grant of every scope ("*").
func visible(g access.Grant, scope string) bool {
	if scope == "" {
		return slices.Contains(g.Scopes, "*")
	}
	parts := strings.Split(strings.Trim(scope, "/"), "/")
	if len(parts) != 4 {
		return false
	}
	return g.Covers(parts[1], parts[3])
}

// scopes remembers the scope of each collection, for filtering live messages, which name only
// the collection. A miss asks the planners and waits. An entry older than scopeFresh is still
// answered at once and read again in the background, once at a time: the live messages arrive in
// a NATS callback, and a wait there holds every message behind it. A collection the planners no
// longer have is forgotten when its entry is read again.
type scopes struct {
	api     schedapi.Client
	now     func() time.Time
	timeout time.Duration // bound on a background read

	mu         sync.Mutex
	m          map[string]scopeEntry // planners' name → scope
	refreshing map[string]bool
	swept      time.Time
}

// scopeFresh is how long a collection's scope is taken as read: a collection's scope changes only
// when it is deleted and made again under another.
const scopeFresh = 30 * time.Second

// scopeForget is how long an entry no lookup has asked for is kept: one in use is read again
// every scopeFresh, so an older one belongs to a collection no longer seen (deleted, or idle),
// and the map does not grow with every collection the gateway has ever seen.
const scopeForget = 10 * scopeFresh

type scopeEntry struct {
	scope string // "" for a collection made on NATS
	read  time.Time
}

func newScopes(api schedapi.Client) *scopes {
	return &scopes{api: api, now: time.Now, timeout: 5 * time.Second, m: map[string]scopeEntry{}, refreshing: map[string]bool{}}
}

func (s *scopes) of(ctx context.Context, collection string) (string, bool) {
	s.mu.Lock()
	now := s.now()
	if now.Sub(s.swept) > scopeFresh {
		s.swept = now
		for name, e := range s.m {
			if now.Sub(e.read) > scopeForget && !s.refreshing[name] {
				delete(s.m, name)
			}
		}
	}
	e, ok := s.m[collection]
	if ok && now.Sub(e.read) > scopeFresh && !s.refreshing[collection] {
		s.refreshing[collection] = true
		go s.refresh(collection)
	}
	s.mu.Unlock()
	if ok {
		return e.scope, true
	}
	sc, err := s.read(ctx, collection)
	return sc, err == nil
}

// refresh reads a remembered collection's scope again; a failure other than its absence keeps
// what was known.
func (s *scopes) refresh(collection string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	_, err := s.read(ctx, collection)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.refreshing, collection)
	var e *schedapi.Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		delete(s.m, collection)
	}
}

func (s *scopes) read(ctx context.Context, collection string) (string, error) {
	var c job.Collection
	if _, err := s.api.Call(ctx, nil, &c, "collections", "get", collection); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.m[collection] = scopeEntry{scope: c.Tags[armScopeTag], read: s.now()}
	s.mu.Unlock()
	return c.Tags[armScopeTag], nil
}
