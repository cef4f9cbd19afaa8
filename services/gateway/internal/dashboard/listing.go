package dashboard

import (
	"strconv"
	"strings"
	"sync"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// jobRow is a job in a listing.
type jobRow struct {
	Collection string            `json:"collection"`
	Name       string            `json:"name"`
	State      string            `json:"state"` // effective: Paused when the collection is disabled
	Action     string            `json:"action"`
	Status     *job.Status       `json:"status,omitempty"`
	Last       *job.HistoryEntry `json:"last,omitempty"`
}

// jobFilter is what a jobs listing asks for besides its place.
type jobFilter struct{ prefix, state, actionType string }

// jobs lists jobs of one collection (collection=) or of every visible one, top at a time, with
// a name prefix (q), a state and an action type. It continues after the cursor: "<c>/<j>" after
// job j of collection c ("<c>/" from c's first job), "<c>" after all of collection c. It reads
// the planners for at most listingTime and listingReads pages: a filter that few jobs match
// may answer fewer than top rows, or none, with the cursor from which to search on.
func (s *Server) jobs(c *call) (any, error) {
	q := c.r.URL.Query()
	top, _ := strconv.Atoi(q.Get("top"))
	if top <= 0 || top > 200 {
		top = 50
	}
	l := &listing{s: s, c: c, top: top, rows: []jobRow{},
		budget: &readBudget{left: s.listingReads, until: s.now().Add(s.listingTime), now: s.now},
		filter: jobFilter{prefix: q.Get("q"), state: q.Get("state"), actionType: strings.ToLower(q.Get("type"))}}
	afterColl, afterJob, inColl := strings.Cut(q.Get("after"), "/")
	var err error
	if name := q.Get("collection"); name != "" {
		err = l.one(name, afterColl, afterJob, inColl)
	} else {
		err = l.all(afterColl, afterJob, inColl)
	}
	if err != nil {
		return nil, err
	}
	s.lastRuns(c, l.rows)
	return map[string]any{"value": l.rows, "next": l.next}, nil
}

// listing is one jobs listing under way.
type listing struct {
	s      *Server
	c      *call
	top    int
	filter jobFilter
	budget *readBudget
	rows   []jobRow
	next   string // the cursor to go on from; "" when the listing is complete
}

// one lists a single collection's jobs, from the cursor's job when it is in that collection.
func (l *listing) one(name, afterColl, afterJob string, inColl bool) error {
	if afterColl > name || (afterColl == name && !inColl) {
		return nil // the cursor is past the collection
	}
	if afterColl < name {
		afterJob = ""
	}
	coll, err := l.s.collection(l.c, name)
	if err != nil {
		return err
	}
	_, err = l.visit(coll, afterJob)
	return err
}

// all lists the jobs of every visible collection in name order, from the cursor on.
func (l *listing) all(afterColl, afterJob string, inColl bool) error {
	if inColl && afterColl != "" {
		coll, err := l.s.collection(l.c, afterColl)
		switch {
		case notFound(err): // deleted, or not the caller's: go on after it
		case err != nil:
			return err
		default:
			if stop, err := l.visit(coll, afterJob); stop || err != nil {
				return err
			}
		}
	}
	w := l.s.walkCollections(l.c, afterColl)
	for {
		coll, ok, err := w.next(l.budget)
		if err != nil {
			return err
		}
		if !ok {
			if !w.ended {
				l.next = w.passed
			}
			return nil
		}
		if stop, err := l.visit(coll, ""); stop || err != nil {
			return err
		}
	}
}

// visit adds a collection's matching jobs after a name; stop when the page is full or the
// budget spent, the cursor then set.
func (l *listing) visit(coll job.Collection, after string) (stop bool, err error) {
	if after == "" {
		after = bus.AfterForPrefix(l.filter.prefix)
	}
	rows, last, spent, err := l.s.collectionJobs(l.c, l.budget, coll, after, l.filter, l.top-len(l.rows))
	if err != nil {
		return true, err
	}
	l.rows = append(l.rows, rows...)
	if len(l.rows) >= l.top || spent {
		l.next = coll.Name + "/" + last
		return true, nil
	}
	return false, nil
}

// collectionJobs reads up to want matching jobs of a collection after a name, page by page, as
// long as the budget allows (spent when it stopped it); last is the last name read, to go on
// from.
func (s *Server) collectionJobs(c *call, budget *readBudget, coll job.Collection, after string, f jobFilter, want int) (rows []jobRow, last string, spent bool, err error) {
	last = after
	// Filters the planners do not apply are applied here: read more a page.
	top := 100
	if f.state == "Paused" || f.actionType != "" {
		top = 1000
	}
	for len(rows) < want {
		if !budget.take() {
			return rows, last, true, nil
		}
		var page struct {
			Value    []job.Definition `json:"value"`
			NextLink *struct {
				After string `json:"after"`
			} `json:"nextLink"`
		}
		req := map[string]any{"top": top, "after": last}
		if f.state != "" && f.state != "Paused" {
			req["state"] = f.state
		}
		if _, err := s.api.Call(c.ctx, req, &page, "jobs", "list", coll.Name); err != nil {
			return nil, "", false, err
		}
		for _, d := range page.Value {
			name := d.Name
			if _, j, ok := strings.Cut(d.Name, "/"); ok {
				name = j
			}
			if f.prefix != "" && !strings.HasPrefix(name, f.prefix) {
				return rows, name, false, nil // past the prefix: the index is in name order
			}
			last = name
			row := rowOf(coll, name, d)
			if (f.state == "Paused" && row.State != "Paused") || (f.actionType != "" && strings.ToLower(row.Action) != f.actionType) {
				continue
			}
			rows = append(rows, row)
			if len(rows) == want {
				return rows, name, false, nil
			}
		}
		if page.NextLink == nil {
			break
		}
		// The planners read a bounded part of a collection a request when they filter: their
		// cursor may be past the last job they answered, or the page empty.
		last = max(last, page.NextLink.After)
		if f.prefix != "" && last > f.prefix && !strings.HasPrefix(last, f.prefix) {
			break // past the prefix
		}
	}
	return rows, last, false, nil
}

// rowOf is a job's row in a listing: its state as it acts (Paused when its collection is
// disabled).
func rowOf(coll job.Collection, name string, d job.Definition) jobRow {
	row := jobRow{Collection: coll.Name, Name: name, State: string(d.Properties.State), Status: d.Properties.Status}
	if row.State == "" {
		row.State = string(job.StateEnabled)
	}
	if coll.Properties.State.Pauses() && row.State == string(job.StateEnabled) {
		row.State = "Paused"
	}
	if d.Properties.Action != nil {
		row.Action = string(d.Properties.Action.Type)
	}
	return row
}

// lastRuns adds each row's latest history entry, a few requests at a time.
func (s *Server) lastRuns(c *call, rows []jobRow) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for i := range rows {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			var page struct {
				Value []job.HistoryEntry `json:"value"`
			}
			if _, err := s.api.Call(c.ctx, map[string]int{"top": 1}, &page, "jobs", "history", rows[i].Collection, rows[i].Name); err == nil && len(page.Value) > 0 {
				rows[i].Last = &page.Value[0]
			}
		})
	}
	wg.Wait()
}
