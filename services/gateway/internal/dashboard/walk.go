package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/resched/resched/services/gateway/internal/schedapi"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// A request that goes through many collections reads the planners a page at a time, for a
// bounded time and number of pages: it answers with what it found and where to go on rather
// than read every collection, or every job of every collection (a filter that matches nothing
// would), while the page waits and the planners serve it.
const (
	// listingReads and listingTime bound the planner reads of one jobs listing (Server fields,
	// for tests).
	listingReads = 500
	listingTime  = time.Second
	// pickerReads bounds the pages of 1,000 collections read for the overview and the pages'
	// collection pickers.
	pickerReads = 10
)

// readBudget counts the planner reads a request may still make, until a time (zero: none).
type readBudget struct {
	left  int
	until time.Time
	now   func() time.Time
	taken int
}

// take spends one read; false when none is left or the time is over (the first read is always
// made, so that every request goes on).
func (b *readBudget) take() bool {
	if b.left <= 0 || (b.taken > 0 && !b.until.IsZero() && !b.now().Before(b.until)) {
		return false
	}
	b.left--
	b.taken++
	return true
}

// collectionWalk goes through every collection in name order after a name, the planners'
// listing read a page of 1,000 at a time.
type collectionWalk struct {
	s      *Server
	c      *call
	req    any              // the next page's request
	page   []job.Collection // read and not yet taken
	ended  bool             // the planners' listing has no further page
	passed string           // the last collection taken, visible or not
	count  *int             // every collection, as the last page read counted them (nil: not said)
	// within, when set, ends the walk at the first name it refuses, visible or not.
	within func(name string) bool
}

func (s *Server) walkCollections(c *call, after string) *collectionWalk {
	return &collectionWalk{s: s, c: c, req: map[string]any{"top": 1000, "after": after}, passed: after}
}

// next is the next collection the caller may see; ok is false at the end of the listing, or
// when a page is to be read and the budget has none left (ended says which).
func (w *collectionWalk) next(budget *readBudget) (coll job.Collection, ok bool, err error) {
	for {
		for len(w.page) > 0 {
			coll, w.page = w.page[0], w.page[1:]
			if coll.Name <= w.passed {
				continue // a planner of a release before the cursor starts from the first page
			}
			if w.within != nil && !w.within(coll.Name) {
				w.page, w.ended = nil, true
				return job.Collection{}, false, nil
			}
			w.passed = coll.Name
			if visible(w.c.grant, coll.Tags[armScopeTag]) {
				return coll, true, nil
			}
		}
		if w.ended || !budget.take() {
			return job.Collection{}, false, nil
		}
		var page struct {
			Value    []job.Collection `json:"value"`
			NextLink json.RawMessage  `json:"nextLink"`
			Count    *int             `json:"count"` // a planner of an earlier release says none
		}
		if _, err := w.s.api.Call(w.c.ctx, w.req, &page, "collections", "list"); err != nil {
			return job.Collection{}, false, err
		}
		w.page, w.count = page.Value, page.Count
		w.ended = len(page.NextLink) == 0 || string(page.NextLink) == "null"
		w.req = page.NextLink
	}
}

// visibleCollections are the collections the caller may see, in name order, from at most
// pickerReads pages of the planners' listing; more is true when the listing goes on. total is
// how many the caller may see in all, -1 when unknown: a grant of every scope sees them all, as
// the planners count them; another sees those of its scopes, which only reading them counts.
func (s *Server) visibleCollections(c *call) (all []job.Collection, more bool, total int, err error) {
	w := s.walkCollections(c, "")
	budget := &readBudget{left: pickerReads}
	for {
		coll, ok, err := w.next(budget)
		if err != nil {
			return nil, false, 0, err
		}
		if !ok {
			switch {
			case w.ended:
				return all, false, len(all), nil
			case w.count != nil && slices.Contains(c.grant.Scopes, "*"):
				return all, true, *w.count, nil
			}
			return all, true, -1, nil
		}
		all = append(all, coll)
	}
}

// pickerMatches bounds the collections a picker's search answers.
const pickerMatches = 50

// matchingCollections are the first n collections the caller may see whose names start with
// prefix, in name order, from at most pickerReads pages of the planners' listing read from the
// prefix on; more is true when more may match.
func (s *Server) matchingCollections(c *call, prefix string, n int) (found []job.Collection, more bool, err error) {
	w := s.walkCollections(c, bus.AfterForPrefix(prefix))
	w.within = func(name string) bool { return strings.HasPrefix(name, prefix) || name < prefix }
	budget := &readBudget{left: pickerReads}
	for {
		coll, ok, err := w.next(budget)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return found, !w.ended, nil
		}
		if !strings.HasPrefix(coll.Name, prefix) {
			continue // before it: a planner of a release before the cursor starts from the first
		}
		if len(found) == n {
			return found, true, nil
		}
		found = append(found, coll)
	}
}

// notFound reports whether err says a collection is missing or not the caller's to see.
func notFound(err error) bool {
	var he *httpError
	var se *schedapi.Error
	return (errors.As(err, &he) && he.Status == http.StatusNotFound) || (errors.As(err, &se) && se.Status == http.StatusNotFound)
}
