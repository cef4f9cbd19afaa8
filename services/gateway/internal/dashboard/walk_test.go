package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/shared/job"
)

// pagingPlanners answers the listings the way the planners do (name order, an "after" cursor,
// a nextLink while more follows), in small pages so that a listing takes many, and counts the
// reads. Collections named in teamB carry that scope; the rest have none.
type pagingPlanners struct {
	mu          sync.Mutex
	collections []string            // in name order
	jobs        map[string][]string // in name order
	disabled    map[string]bool     // "c/j"
	teamB       map[string]bool
	reads       int
	// byOffset makes collections.list page as planners before the cursor did: "after"
	// ignored, a nextLink with "skip".
	byOffset bool
	// downAfter: the planners stop answering after so many reads (0: never).
	downAfter int
}

const (
	collectionsAPage = 10
	jobsAPage        = 2
	jobsScan         = 3 // jobs a filtered listing reads a request
)

func newPagingPlanners(collections, jobsEach int) *pagingPlanners {
	p := &pagingPlanners{jobs: map[string][]string{}, disabled: map[string]bool{}, teamB: map[string]bool{}}
	for i := range collections {
		c := fmt.Sprintf("c%03d", i)
		p.collections = append(p.collections, c)
		for j := range jobsEach {
			p.jobs[c] = append(p.jobs[c], fmt.Sprintf("j%d", j))
		}
	}
	return p
}

func (p *pagingPlanners) RequestMsgWithContext(_ context.Context, msg *nats.Msg) (*nats.Msg, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	if p.downAfter > 0 && p.reads > p.downAfter {
		return nil, nats.ErrNoResponders
	}
	tokens := strings.Split(strings.TrimPrefix(msg.Subject, "resched.api."), ".")
	var req struct {
		Top   int    `json:"top"`
		After string `json:"after"`
		State string `json:"state"`
		Skip  int    `json:"skip"`
	}
	_ = json.Unmarshal(msg.Data, &req)
	reply := nats.NewMsg(msg.Reply)
	var out any
	switch strings.Join(tokens[:2], ".") {
	case "collections.get":
		if !slices.Contains(p.collections, tokens[2]) {
			reply.Header.Set(micro.ErrorCodeHeader, "404")
			reply.Header.Set(micro.ErrorHeader, "not found")
			return reply, nil
		}
		out = p.collection(tokens[2])
	case "collections.list":
		if p.byOffset {
			names := p.collections[min(req.Skip, len(p.collections)):min(req.Skip+collectionsAPage, len(p.collections))]
			var value []job.Collection
			for _, c := range names {
				value = append(value, p.collection(c))
			}
			page := map[string]any{"value": value}
			if req.Skip+len(names) < len(p.collections) {
				page["nextLink"] = map[string]any{"top": collectionsAPage, "skip": req.Skip + len(names)}
			}
			out = page
			break
		}
		var value []job.Collection
		names := p.after(p.collections, req.After, min(req.Top, collectionsAPage))
		for _, c := range names {
			value = append(value, p.collection(c))
		}
		page := p.page(value, names, len(names) > 0 && names[len(names)-1] != p.collections[len(p.collections)-1], req.State)
		page["count"] = len(p.collections) // as planners count them since the names' index
		out = page
	case "jobs.list":
		// As the planners do, a filter reads a bounded part of the collection a request
		// (jobsScan here): a page may be empty, its cursor past the jobs it answered.
		all := p.jobs[tokens[2]]
		scan := p.after(all, req.After, len(all))
		var value []job.Definition
		read := ""
		for i, j := range scan {
			if len(value) == min(req.Top, jobsAPage) || (req.State != "" && i == jobsScan) {
				break
			}
			read = j
			if req.State == "Disabled" && !p.disabled[tokens[2]+"/"+j] {
				continue
			}
			d := job.Definition{Name: tokens[2] + "/" + j}
			if p.disabled[tokens[2]+"/"+j] {
				d.Properties.State = job.StateDisabled
			}
			value = append(value, d)
		}
		page := map[string]any{"value": value}
		if read != "" && read != all[len(all)-1] {
			page["nextLink"] = map[string]any{"after": read, "top": req.Top, "state": req.State}
		}
		out = page
	case "jobs.history":
		out = map[string]any{"value": []any{}}
	default:
		return nil, fmt.Errorf("no such operation %s", msg.Subject)
	}
	reply.Data, _ = json.Marshal(out)
	return reply, nil
}

func (p *pagingPlanners) collection(name string) job.Collection {
	c := job.Collection{Name: name, Tags: map[string]string{}}
	if p.teamB[name] {
		c.Tags[armScopeTag] = teamB
	}
	return c
}

// after is up to n of names (sorted) after a name.
func (p *pagingPlanners) after(names []string, after string, n int) []string {
	i, _ := slices.BinarySearch(names, after)
	if i < len(names) && names[i] == after {
		i++
	}
	return names[i:min(len(names), i+n)]
}

func (p *pagingPlanners) page(value any, names []string, more bool, state string) map[string]any {
	out := map[string]any{"value": value}
	if more {
		out["nextLink"] = map[string]any{"after": names[len(names)-1], "top": len(names), "state": state}
	}
	return out
}

func (p *pagingPlanners) readsSince(n *int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.reads - *n
	*n = p.reads
	return d
}

// testListingReads bounds the tests' listings: the planners here answer at once, so time
// would not.
const testListingReads = 20

// dashboardOn is a dashboard whose planners are p, called with grant g.
func dashboardOn(t *testing.T, p *pagingPlanners, g access.Grant) *httptest.Server {
	t.Helper()
	d, err := New(Config{NATS: natstest.Start(t).Connect(t), Requests: p, Subjects: bus.NewSubjects("resched"), Auth: &switchAuth{grant: g}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	d.listingReads = testListingReads
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return srv
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

type jobsPage struct {
	Value []jobRow `json:"value"`
	Next  string   `json:"next"`
}

// listAll follows a jobs listing's cursor to its end, checking that no request read more than
// the budget (and the cursor's collection), and returns the jobs listed and the requests made.
func listAll(t *testing.T, srv *httptest.Server, p *pagingPlanners, query url.Values, between func(after string)) (listed []string, requests int) {
	t.Helper()
	var reads int
	p.readsSince(&reads)
	after := ""
	for {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		if after != "" {
			q.Set("after", after)
		}
		var page jobsPage
		getJSON(t, srv.URL+"/dashboard/api/jobs?"+q.Encode(), &page)
		requests++
		// A listing's own reads, then one history read a row for its last run.
		if n := p.readsSince(&reads) - len(page.Value); n > testListingReads+1 {
			t.Fatalf("request %d (after %q) read the planners %d times, want at most %d", requests, after, n, testListingReads+1)
		}
		for _, r := range page.Value {
			listed = append(listed, r.Collection+"/"+r.Name)
		}
		if page.Next == "" {
			return listed, requests
		}
		if page.Next == after || requests > 1000 {
			t.Fatalf("the cursor does not move: %q", after)
		}
		after = page.Next
		if between != nil {
			between(after)
		}
	}
}

// A filter that few jobs match, over many collections, is answered a bounded number of reads at
// a time with where to search on, rather than by one request reading every job of every
// collection while the page waits.
func TestAFilterOverManyCollectionsSearchesABoundedPartEachRequest(t *testing.T) {
	p := newPagingPlanners(120, 5)
	p.disabled["c007/j3"], p.disabled["c118/j0"] = true, true
	srv := dashboardOn(t, p, access.Grant{Subject: "ops", Role: access.Reader, Scopes: []string{"*"}})
	for _, state := range []string{"Disabled", "Paused"} { // the planners filter the first, the dashboard the second
		listed, requests := listAll(t, srv, p, url.Values{"state": {state}}, nil)
		want := []string{"c007/j3", "c118/j0"}
		if state == "Paused" {
			want = nil
		}
		if !slices.Equal(listed, want) {
			t.Errorf("state %s: listed %v, want %v", state, listed, want)
		}
		if requests < 2 {
			t.Errorf("state %s: one request read all 120 collections", state)
		}
	}
}

// Followed to its end, a listing gives each job the caller may see once, in order, though
// collections it has passed or stopped in are deleted between its requests.
func TestAListingGivesEachVisibleJobOnceInOrder(t *testing.T) {
	p := newPagingPlanners(60, 5)
	for i := 0; i < 60; i += 3 {
		p.teamB[fmt.Sprintf("c%03d", i)] = true
	}
	srv := dashboardOn(t, p, access.Grant{Subject: "a", Role: access.Reader, Scopes: []string{teamA, "/subscriptions/s0/resourceGroups/other"}})
	// The grant sees no ARM collection (teamA holds none) and the NATS ones only with "*".
	listed, _ := listAll(t, srv, p, url.Values{"top": {"7"}}, nil)
	if len(listed) != 0 {
		t.Fatalf("a grant of teamA listed %v", listed)
	}
	srv = dashboardOn(t, p, access.Grant{Subject: "ops", Role: access.Reader, Scopes: []string{"*"}})
	var deleted []string
	listed, requests := listAll(t, srv, p, url.Values{"top": {"7"}}, func(after string) {
		// Delete the cursor's collection now and then: the listing goes on after it.
		c, _, _ := strings.Cut(after, "/")
		if len(deleted) < 3 && c > "c020" {
			p.mu.Lock()
			p.collections = slices.DeleteFunc(p.collections, func(n string) bool { return n == c })
			p.mu.Unlock()
			deleted = append(deleted, c)
		}
	})
	var want []string
	for i := range 60 {
		c := fmt.Sprintf("c%03d", i)
		if slices.Contains(deleted, c) {
			continue
		}
		for j := range 5 {
			want = append(want, fmt.Sprintf("%s/j%d", c, j))
		}
	}
	// A deleted collection's jobs listed before it went are kept: drop them to compare.
	listed = slices.DeleteFunc(listed, func(s string) bool { c, _, _ := strings.Cut(s, "/"); return slices.Contains(deleted, c) })
	if !slices.Equal(listed, want) {
		t.Fatalf("listed %d jobs, want %d, each once in order:\n%v", len(listed), len(want), listed)
	}
	if requests < 300/7 {
		t.Errorf("%d requests for 300 jobs 7 at a time", requests)
	}
	// During a rolling upgrade, a planner of the release before the cursor starts each listing
	// from the first collection: those before the cursor are passed over, not listed again.
	p.byOffset = true
	again, _ := listAll(t, srv, p, url.Values{"top": {"7"}}, nil)
	p.byOffset = false
	if !slices.Equal(again, want) {
		t.Fatalf("through planners paging by offset: listed %d jobs, want %d, each once in order", len(again), len(want))
	}
	// One collection, by its own listing.
	listed, _ = listAll(t, srv, p, url.Values{"top": {"2"}, "collection": {"c050"}}, nil)
	if !slices.Equal(listed, []string{"c050/j0", "c050/j1", "c050/j2", "c050/j3", "c050/j4"}) {
		t.Errorf("collection c050 listed %v", listed)
	}
}

// The overview counts and shows the collections of a bounded part of the listing, and says
// when there are more, rather than read every collection of every tenant at each look.
func TestTheOverviewReadsABoundedPartOfManyCollections(t *testing.T) {
	p := newPagingPlanners(250, 0)
	srv := dashboardOn(t, p, access.Grant{Subject: "ops", Role: access.Reader, Scopes: []string{"*"}})
	var o struct {
		Collections     []collectionInfo `json:"collections"`
		CollectionCount int              `json:"collectionCount"`
		More            bool             `json:"moreCollections"`
	}
	var reads int
	p.readsSince(&reads)
	getJSON(t, srv.URL+"/dashboard/api/overview", &o)
	if n := p.readsSince(&reads); n != pickerReads {
		t.Errorf("the overview read %d pages, want %d", n, pickerReads)
	}
	// The planners count them all, and a grant of every scope sees them all.
	if len(o.Collections) != overviewCollections || o.Collections[0].Name != "c000" || o.CollectionCount != 250 || o.More {
		t.Errorf("overview: %d collections from %s, count %d, more %v; want 100 from c000, 250", len(o.Collections), o.Collections[0].Name, o.CollectionCount, o.More)
	}
	// Read again as results come, the last hour's figures alone: no collection read.
	var light map[string]json.RawMessage
	getJSON(t, srv.URL+"/dashboard/api/overview?collections=none", &light)
	if n := p.readsSince(&reads); n != 0 || light["minutes"] == nil || light["collections"] != nil {
		t.Errorf("the overview's figures alone read %d pages and answered %v", n, light)
	}
	p.collections = p.collections[:35]
	getJSON(t, srv.URL+"/dashboard/api/overview", &o)
	if len(o.Collections) != 35 || o.CollectionCount != 35 || o.More {
		t.Errorf("overview of 35: %d collections, count %d, more %v", len(o.Collections), o.CollectionCount, o.More)
	}
}

// Planners of an earlier release count no collections, and a scoped grant sees only some of
// those counted: the overview's count then stops at the collections read ("more").
func TestTheOverviewCountStopsWhereTheCollectionsAreNotCounted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		byOffset bool
		scopes   []string
	}{{"earlier planners", true, []string{"*"}}, {"a scoped grant", false, []string{"/subscriptions/s1"}}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPagingPlanners(250, 0)
			p.byOffset = tc.byOffset
			srv := dashboardOn(t, p, access.Grant{Subject: "ops", Role: access.Reader, Scopes: tc.scopes})
			var o struct {
				CollectionCount int  `json:"collectionCount"`
				More            bool `json:"moreCollections"`
			}
			getJSON(t, srv.URL+"/dashboard/api/overview", &o)
			if o.CollectionCount == 250 || !o.More {
				t.Errorf("count %d, more %v: want the count of those read, and more", o.CollectionCount, o.More)
			}
		})
	}
}

// A listing's budget ends at its time as well as at its count, but its first read is always
// made: a slow planner still moves each request on.
func TestABudgetEndsAtItsTimeAfterItsFirstRead(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := start
	b := &readBudget{left: 100, until: start.Add(time.Second), now: func() time.Time { return now }}
	now = start.Add(5 * time.Second) // the request began late, or its first read is slow
	if !b.take() {
		t.Fatal("the first read was refused")
	}
	if b.take() {
		t.Fatal("a read after the time was allowed")
	}
	now = start
	b = &readBudget{left: 100, until: start.Add(time.Second), now: func() time.Time { return now }}
	n := 0
	for b.take() {
		n++
		now = now.Add(300 * time.Millisecond)
	}
	if n != 4 { // at 0, 0.3, 0.6 and 0.9 s
		t.Errorf("%d reads in a second of reads of 300 ms, want 4", n)
	}
	b = &readBudget{left: 3}
	for n = 0; b.take(); n++ {
	}
	if n != 3 {
		t.Errorf("%d reads of a budget of 3", n)
	}
}

// Planners that stop answering in the middle of a listing, or of the overview's collections,
// are said as such (503), not answered as a shorter listing.
func TestAListingWhosePlannersStopAnsweringFails(t *testing.T) {
	p := newPagingPlanners(60, 5)
	srv := dashboardOn(t, p, access.Grant{Subject: "ops", Role: access.Reader, Scopes: []string{"*"}})
	for _, path := range []string{"jobs?state=Disabled", "jobs", "overview", "collections"} {
		p.mu.Lock()
		p.downAfter = p.reads + 3 // a page of collections, then two more reads
		p.mu.Unlock()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/dashboard/api/"+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s with the planners gone mid-way: %s, want 503", path, resp.Status)
		}
	}
}

// A picker's search answers the collections whose names start with what was typed, read from
// there on: one past the first pages of the listing is found in a page or two, and the search
// stops at the first name past the prefix. A scoped grant finds only its own.
func TestAPickerFindsACollectionPastTheFirstPages(t *testing.T) {
	p := newPagingPlanners(250, 0)
	for i := 240; i < 250; i += 2 {
		p.teamB[fmt.Sprintf("c%03d", i)] = true
	}
	srv := dashboardOn(t, p, access.Grant{Subject: "ops", Role: access.Reader, Scopes: []string{"*"}})
	var got struct {
		Value []collectionInfo `json:"value"`
		More  bool             `json:"more"`
	}
	names := func() string {
		var out []string
		for _, c := range got.Value {
			out = append(out, c.Name)
		}
		return strings.Join(out, " ")
	}
	var reads int
	p.readsSince(&reads)
	getJSON(t, srv.URL+"/dashboard/api/collections?prefix=c24", &got)
	if names() != "c240 c241 c242 c243 c244 c245 c246 c247 c248 c249" || got.More {
		t.Errorf("prefix c24: %q, more %v; want c240 to c249, no more", names(), got.More)
	}
	if n := p.readsSince(&reads); n > 2 {
		t.Errorf("prefix c24 read %d pages, want 2 at most", n)
	}
	getJSON(t, srv.URL+"/dashboard/api/collections?prefix=c1", &got)
	if len(got.Value) != pickerMatches || got.Value[0].Name != "c100" || !got.More {
		t.Errorf("prefix c1: %d from %q, more %v; want the first %d from c100, more", len(got.Value), names(), got.More, pickerMatches)
	}
	getJSON(t, srv.URL+"/dashboard/api/collections", &got) // nothing typed: from the first
	if len(got.Value) != pickerMatches || got.Value[0].Name != "c000" || !got.More {
		t.Errorf("no prefix: %d from %q, more %v; want the first %d from c000, more", len(got.Value), names(), got.More, pickerMatches)
	}
	getJSON(t, srv.URL+"/dashboard/api/collections?prefix=x", &got)
	if len(got.Value) != 0 || got.More {
		t.Errorf("prefix x: %q, more %v; want none", names(), got.More)
	}
	srv = dashboardOn(t, p, access.Grant{Subject: "b", Role: access.Reader, Scopes: []string{teamB}})
	getJSON(t, srv.URL+"/dashboard/api/collections?prefix=c24", &got)
	if names() != "c240 c242 c244 c246 c248" {
		t.Errorf("prefix c24 for team B: %q, want its five", names())
	}
}
