package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/resched/resched/services/internal/apitest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// pageOf is one page of a listing, its nextLink kept as the planner wrote it.
type pageOf[T any] struct {
	Value    []T             `json:"value"`
	NextLink json.RawMessage `json:"nextLink"`
}

// follow asks for a listing and follows nextLink, sent back as it is, to the end.
func follow[T any](t *testing.T, e *env, subject, first string) ([]T, []string) {
	t.Helper()
	var all []T
	var links []string
	body := first
	for range 100 {
		var p pageOf[T]
		e.ok(t, subject, body, &p)
		all = append(all, p.Value...)
		if len(p.NextLink) == 0 {
			return all, links
		}
		links = append(links, string(p.NextLink))
		body = string(p.NextLink)
	}
	t.Fatal("more than 100 pages")
	return nil, nil
}

// Listing follows the collection's index with a cursor: every job once, in name order, the
// state filter kept across pages.
func TestJobListingPagesByCursor(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	var want, wantDisabled []string
	for i := range 230 {
		name := fmt.Sprintf("j%03d", i)
		def := hourly
		if i%7 == 0 {
			def = strings.Replace(hourly, `"recurrence"`, `"state": "Disabled", "recurrence"`, 1)
			wantDisabled = append(wantDisabled, "c/"+name)
		}
		e.ok(t, "jobs.put.c."+name, def, nil)
		want = append(want, "c/"+name)
	}
	got, links := follow[job.Definition](t, e, "jobs.list.c", `{"top": 100}`)
	if names := jobNames(got); !slices.Equal(names, want) {
		t.Fatalf("listed %d jobs, want %d in order", len(names), len(want))
	}
	if len(links) != 2 || !strings.Contains(links[0], `"after":"j099"`) {
		t.Errorf("nextLinks %v, want cursors after j099 and j199", links)
	}
	got, links = follow[job.Definition](t, e, "jobs.list.c", `{"top": 10, "state": "disabled"}`)
	if names := jobNames(got); !slices.Equal(names, wantDisabled) {
		t.Errorf("disabled listing %v, want %v", names, wantDisabled)
	}
	if len(links) == 0 || !strings.Contains(links[0], `"state":"Disabled"`) {
		t.Errorf("the filter is not kept in nextLink: %v", links)
	}
	// skip still works, and a page deep in the listing answers the same jobs.
	var p pageOf[job.Definition]
	e.ok(t, "jobs.list.c", `{"top": 5, "skip": 200}`, &p)
	if names := jobNames(p.Value); !slices.Equal(names, want[200:205]) {
		t.Errorf("skip 200: %v", names)
	}
}

// A filter that few jobs of a large collection match reads a bounded part of it a request:
// short or empty pages, each with a nextLink from where it stopped, rather than one request
// reading every job while the planner's API worker and Redis serve it. A skip goes on across
// such pages.
func TestAFilterReadsABoundedPartOfALargeCollection(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	const n = 25_000
	apitest.BulkPut(t, e.nc, "c", n, func(i int) string { return jobName(i) }, func(i int) string {
		if i == 3 || i == 12_000 || i == 24_999 {
			return strings.Replace(hourly, `"recurrence"`, `"state": "Disabled", "recurrence"`, 1)
		}
		return hourly
	})
	got, links := follow[job.Definition](t, e, "jobs.list.c", `{"top": 10, "state": "Disabled"}`)
	if names := jobNames(got); !slices.Equal(names, []string{"c/" + jobName(3), "c/" + jobName(12_000), "c/" + jobName(24_999)}) {
		t.Fatalf("disabled jobs listed %v", names)
	}
	if len(links) < 2 {
		t.Errorf("%d nextLinks: one request read all %d jobs", len(links), n)
	}
	// Skip the first two disabled jobs: the skip left goes on in the nextLink.
	got, _ = follow[job.Definition](t, e, "jobs.list.c", `{"top": 10, "state": "Disabled", "skip": 2}`)
	if names := jobNames(got); !slices.Equal(names, []string{"c/" + jobName(24_999)}) {
		t.Errorf("disabled jobs after skipping two: %v", names)
	}
}

// History pages by position with a cursor: every entry once, newest first, the status filter
// kept across pages.
func TestHistoryPagesByCursor(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	base := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := range 45 {
		status := job.ExecutionCompleted
		if i%3 == 0 {
			status = job.ExecutionFailed
		}
		at := base.Add(time.Duration(i) * time.Minute)
		if _, err := e.store.ApplyResult(context.Background(), "c", "j", store.Outcome{ID: fmt.Sprint(i), Scheduled: at, Occurrence: i + 1,
			Entry: job.HistoryEntry{StartTime: at, EndTime: at, ExpectedExecutionTime: at, ActionName: job.ActionNameMain, Status: status,
				Message: fmt.Sprint("attempt ", i), RepeatCount: i + 1}}, base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := follow[job.HistoryEntry](t, e, "jobs.history.c.j", `{"top": 7}`)
	if len(got) != 45 || got[0].Message != "attempt 44" || got[44].Message != "attempt 0" {
		t.Fatalf("history: %d entries, first %q, last %q", len(got), got[0].Message, got[len(got)-1].Message)
	}
	for i := 1; i < len(got); i++ {
		if got[i].StartTime.After(got[i-1].StartTime) {
			t.Fatalf("not newest first at %d", i)
		}
	}
	failed, links := follow[job.HistoryEntry](t, e, "jobs.history.c.j", `{"top": 4, "status": "failed"}`)
	if len(failed) != 15 || len(links) != 3 || !strings.Contains(links[0], `"status":"Failed"`) {
		t.Errorf("failed entries: %d over %d links %v; want 15 over 3", len(failed), len(links), links)
	}

	// Attempts recorded between two pages (a job that fires while someone pages through its
	// history) move nothing from one page onto the next: the cursor finds its entry again.
	var first page[job.HistoryEntry]
	msg := e.ok(t, "jobs.history.c.j", `{"top": 5}`, &first)
	for i := 45; i < 48; i++ {
		at := base.Add(time.Duration(i) * time.Minute)
		if _, err := e.store.ApplyResult(context.Background(), "c", "j", store.Outcome{ID: fmt.Sprint(i), Scheduled: at, Occurrence: i + 1,
			Entry: job.HistoryEntry{StartTime: at, EndTime: at, ExpectedExecutionTime: at, ActionName: job.ActionNameMain,
				Status: job.ExecutionCompleted, Message: fmt.Sprint("attempt ", i), RepeatCount: i + 1}}, base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	var second page[job.HistoryEntry]
	e.ok(t, "jobs.history.c.j", nextLink(t, msg.Data), &second)
	if len(first.Value) != 5 || len(second.Value) != 5 || first.Value[4].Message != "attempt 40" || second.Value[0].Message != "attempt 39" {
		t.Fatalf("pages with attempts recorded between them: %q, then %q; want attempts 44 to 40, then 39 to 35",
			messages(first.Value), messages(second.Value))
	}
	// A cursor whose entry is no longer there (trimmed with everything older) ends the listing;
	// one that is not a position is refused.
	var gone page[job.HistoryEntry]
	if msg := e.ok(t, "jobs.history.c.j", `{"top": 5, "after": "5.nosuchmark"}`, &gone); len(gone.Value) != 0 || nextLink(t, msg.Data) != "" {
		t.Fatalf("a cursor past a trimmed entry: %q, nextLink %s", messages(gone.Value), nextLink(t, msg.Data))
	}
	e.fail(t, "jobs.history.c.j", `{"after": "x.y"}`, "400", "BadRequest")
}

func messages(es []job.HistoryEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

// A page never outgrows what NATS carries in one reply (1 MiB by default): 100 jobs of 11 KB
// each would be 1.1 MB, a reply the server refuses, which left the client waiting until its
// timeout. The page ends early instead, and nextLink goes on from there.
func TestLargeJobsPageWithinOneReply(t *testing.T) {
	e := newEnv(t)
	want := putLargeJobs(t, e)
	got, links := follow[job.Definition](t, e, "jobs.list.c", `{"top": 100}`)
	if names := jobNames(got); !slices.Equal(names, want) {
		t.Fatalf("listed %d jobs, want %d in order", len(names), len(want))
	}
	if len(links) == 0 {
		t.Errorf("one page of 1.1 MB, want it cut")
	}
}

// The limit is the server's at each request: after a restart with a max_payload of 256 KiB,
// a page fitted to the 1 MiB read at start would be refused (and the caller wait until its
// timeout).
func TestPagesFitAServerRestartedWithASmallerMaxPayload(t *testing.T) {
	e := newEnv(t)
	want := putLargeJobs(t, e)
	e.nats.Reload(func(o *server.Options) { o.MaxPayload = 256 << 10 })
	e.nats.Restart()
	testenv.Eventually(t, 10*time.Second, "the API's connection to learn the new max_payload", func() bool {
		return e.conn.MaxPayload() == 256<<10 && e.nc.MaxPayload() == 256<<10
	})
	got, links := follow[job.Definition](t, e, "jobs.list.c", `{"top": 100}`)
	if names := jobNames(got); !slices.Equal(names, want) {
		t.Fatalf("listed %d jobs, want %d in order", len(names), len(want))
	}
	if len(links) < 4 {
		t.Errorf("%d pages of 1.1 MB in all, want at least 5 under 256 KiB", len(links)+1)
	}
}

// putLargeJobs puts 100 jobs of 11 KB (the largest body allowed, and a header) into collection
// c, and returns their names in order.
func putLargeJobs(t *testing.T, e *env) []string {
	t.Helper()
	e.putCollection(t, "c", `{}`)
	body, header := strings.Repeat("x", 8000), strings.Repeat("y", 3000)
	var want []string
	for i := range 100 {
		name := fmt.Sprintf("j%03d", i)
		def := `{"startTime":"2026-03-01T12:00:00Z","action":{"type":"Http","request":{"method":"POST","uri":"http://t/x","body":"` +
			body + `","headers":{"X-Pad":"` + header + `"}}},"recurrence":{"frequency":"Hour"}}`
		e.ok(t, "jobs.put.c."+name, def, nil)
		want = append(want, "c/"+name)
	}
	return want
}

// So does a page of history: 600 entries of 2 KiB (the message a history keeps by default)
// asked for at once.
func TestLargeHistoryPagesWithinOneReply(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	base := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	const n = 600
	var rs []store.Result
	for i := range n {
		at := base.Add(time.Duration(i) * time.Second)
		rs = append(rs, store.Result{Collection: "c", Job: "j", Outcome: store.Outcome{ID: fmt.Sprint(i), Scheduled: at, Occurrence: i + 1,
			Entry: job.HistoryEntry{StartTime: at, EndTime: at, ExpectedExecutionTime: at, ActionName: job.ActionNameMain,
				Status: job.ExecutionCompleted, Message: fmt.Sprintf("attempt %03d ", i) + strings.Repeat("z", 2000), RepeatCount: i + 1}}})
	}
	for _, a := range e.store.ApplyResults(context.Background(), rs, base.Add(time.Hour)) {
		if a.Err != nil {
			t.Fatal(a.Err)
		}
	}
	got, links := follow[job.HistoryEntry](t, e, "jobs.history.c.j", `{"top": 1000}`)
	if len(got) != n || !strings.HasPrefix(got[0].Message, "attempt 599") || !strings.HasPrefix(got[n-1].Message, "attempt 000") {
		t.Fatalf("history: %d entries, want %d newest first", len(got), n)
	}
	if len(links) == 0 {
		t.Errorf("one page of 1.3 MB, want it cut")
	}
}
