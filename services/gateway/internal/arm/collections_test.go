package arm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// A collection's body is checked as the planners check it before the gateway reads it: its
// model once dropped a misspelt member, read an interval of 0 as the default 1, and answered
// a number given as text with Go's words.
func TestACollectionBodyIsCheckedBeforeItIsRead(t *testing.T) {
	srv, err := New(Config{NATS: planner{err: nats.ErrNoResponders}, Subjects: bus.NewSubjects(""), Auth: anyone{}})
	if err != nil {
		t.Fatal(err)
	}
	const path = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/c?api-version=2016-03-01"
	for _, c := range []struct{ body, target, says string }{
		{`{"location":"West US","properties":{"sku":{"name":"Standard"},"quotaa":{"maxJobCount":3}}}`, "properties.quotaa", "not a known property"},
		{`{"properties":{"quota":{"maxRecurrence":{"frequency":"Minute","interval":0}}}}`, "properties.quota.maxRecurrence.interval", "at least 1"},
		{`{"properties":{"quota":{"maxJobCount":"7"}}}`, "properties.quota.maxJobCount", "whole number"},
		{`{"properties":{"sku":{"name":"Gold"}}}`, "properties.sku.name", "Standard"},
		{`{"properties":`, "", "not valid JSON"},
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("PUT", path, strings.NewReader(c.body)))
		var body struct {
			Error struct {
				Code    string
				Details []errorDetail
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 400 || len(body.Error.Details) == 0 ||
			body.Error.Details[0].Target != c.target || !strings.Contains(body.Error.Details[0].Message, c.says) {
			t.Errorf("%s: %d %s, want 400 naming %q and saying %q", c.body, rec.Code, rec.Body, c.target, c.says)
		}
	}
	// A good body, as ARM clients send it (location, plan), goes on to the planners.
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("PUT", path, strings.NewReader(`{"location":"West US","properties":{"sku":{"name":"standard"},"quota":{"maxJobCount":10}}}`)))
	if rec.Code != 503 {
		t.Errorf("a good body: %d %s, want the planners' absence (503)", rec.Code, rec.Body)
	}
}

// pagingPlanners answers collections.list as the planners do: names in order, from after the
// request's cursor, top at a time, a nextLink with the last name while more follow.
type pagingPlanners struct {
	colls []job.Collection // in name order
	reads int
	// oldAt: the read (counted from 1) answered as a planner before the cursor answered it
	// (during a rolling upgrade): "after" ignored, "skip" read, a nextLink with "skip".
	oldAt, answered int
}

func (p *pagingPlanners) RequestMsgWithContext(_ context.Context, m *nats.Msg) (*nats.Msg, error) {
	if m.Subject != "scheduler.api.collections.list" {
		return nil, nats.ErrNoResponders
	}
	p.reads++
	p.answered++
	var req struct {
		Top   int    `json:"top"`
		After string `json:"after"`
		Skip  int    `json:"skip"`
	}
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return nil, err
	}
	old := p.answered == p.oldAt
	i := req.Skip
	if !old && req.Skip == 0 {
		i = sort.Search(len(p.colls), func(i int) bool { return p.colls[i].Name > req.After })
	}
	i = min(i, len(p.colls))
	end := min(i+req.Top, len(p.colls))
	page := map[string]any{"value": p.colls[i:end]}
	switch {
	case end == len(p.colls):
	case old:
		page["nextLink"] = map[string]any{"top": req.Top, "skip": end}
	default:
		page["nextLink"] = map[string]any{"top": req.Top, "after": p.colls[end-1].Name}
	}
	b, err := json.Marshal(page)
	return &nats.Msg{Data: b}, err
}

// A collection listing comes in pages that follow the planners' cursor: every collection of
// the caller's subscription once, in order, none of another, and no request reads every
// collection of every tenant.
func TestCollectionListingsComeInPages(t *testing.T) {
	p := &pagingPlanners{}
	want := map[string][]string{}
	for i := range 25_000 {
		// Subscription s1 has one collection in 25: its callers' pages are short.
		sub := "s2"
		if i%25 == 0 || (i >= 24_000 && i < 24_100) {
			sub = "s1"
		}
		name := fmt.Sprintf("c%05d", i)
		p.colls = append(p.colls, job.Collection{Name: name + "--x", Tags: map[string]string{
			armScopeTag: "/subscriptions/" + sub + "/resourceGroups/rg", armNameTag: name}})
		want[sub] = append(want[sub], name)
	}
	srv, err := New(Config{NATS: p, Subjects: bus.NewSubjects(""), Auth: anyone{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"s1", "s2", "s2 while the planners are upgraded"} {
		if strings.HasSuffix(sub, "upgraded") {
			// A planner of the release before the cursor starts again from the first
			// collection: those before the cursor are passed over, not listed again.
			sub, p.answered, p.oldAt = "s2", 0, 15
		}
		var got []string
		pages, most := 0, 0
		next := "http://gw/subscriptions/" + sub + "/providers/Microsoft.Scheduler/jobCollections?api-version=2016-03-01"
		for next != "" {
			p.reads = 0
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest("GET", next, nil))
			var page struct {
				Value []struct {
					Name string `json:"name"`
				} `json:"value"`
				NextLink string `json:"nextLink"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != 200 {
				t.Fatalf("%s: %d %s", next, rec.Code, rec.Body)
			}
			for _, c := range page.Value {
				got = append(got, c.Name)
			}
			pages++
			most = max(most, p.reads)
			if page.NextLink != "" && !strings.HasPrefix(page.NextLink, "http://gw/subscriptions/"+sub+"/providers/Microsoft.Scheduler/jobCollections?") {
				t.Fatalf("nextLink %q", page.NextLink)
			}
			next = page.NextLink
		}
		if !slices.Equal(got, want[sub]) {
			t.Errorf("%s: %d collections listed, want %d (first %v)", sub, len(got), len(want[sub]), got[:min(3, len(got))])
		}
		if pages < 3 || most > collectionsReads {
			t.Errorf("%s: %d pages, up to %d planner pages read for one: want several pages, at most %d reads each", sub, pages, most, collectionsReads)
		}
	}
}
