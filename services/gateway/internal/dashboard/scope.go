package dashboard

import (
	"context"
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
// the collection. A miss asks the planners; the whole map is read again at most every 30 s.
type scopes struct {
	api  schedapi.Client
	mu   sync.Mutex
	m    map[string]string // planners' name → scope ("" for none)
	read time.Time
}

func (s *scopes) of(ctx context.Context, collection string) (string, bool) {
	s.mu.Lock()
	sc, ok := s.m[collection]
	stale := time.Since(s.read) > 30*time.Second
	s.mu.Unlock()
	if ok && !stale {
		return sc, true
	}
	var c job.Collection
	if _, err := s.api.Call(ctx, nil, &c, "collections", "get", collection); err != nil {
		return "", false
	}
	sc = c.Tags[armScopeTag]
	s.mu.Lock()
	if s.m == nil || stale {
		s.m, s.read = map[string]string{}, time.Now()
	}
	s.m[collection] = sc
	s.mu.Unlock()
	return sc, true
}
