package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/apitest"
	"github.com/resched/resched/services/planner/internal/api"
	"github.com/resched/resched/shared/job"
)

func collectionNames(cs []job.Collection) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// nextLink returns the raw nextLink of a listing's answer, "" when it is absent.
func nextLink(t *testing.T, data []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return string(m["nextLink"])
}

func TestCollectionLifecycle(t *testing.T) {
	e := newEnv(t)

	var c job.Collection
	msg := e.ok(t, "collections.put.c1", `{"location": "West Europe", "properties": {"quota": {"maxJobCount": 10}}}`, &c)
	if msg.Header.Get(api.HeaderCreated) != "true" {
		t.Fatalf("first put: %s header %q, want true", api.HeaderCreated, msg.Header.Get(api.HeaderCreated))
	}
	if c.Name != "c1" || c.ID != "/jobCollections/c1" || c.Location != "West Europe" ||
		c.Properties.State != job.CollectionEnabled || c.Properties.Quota.MaxJobCount != 10 {
		t.Fatalf("put answered %+v", c)
	}
	msg = e.ok(t, "collections.put.c1", `{"properties": {"quota": {"maxJobCount": 20}}}`, &c)
	if msg.Header.Get(api.HeaderCreated) != "false" || c.Properties.Quota.MaxJobCount != 20 {
		t.Fatalf("second put: header %q, collection %+v", msg.Header.Get(api.HeaderCreated), c)
	}
	e.ok(t, "collections.get.c1", "", &c)
	if c.Name != "c1" || c.Properties.Quota.MaxJobCount != 20 {
		t.Fatalf("get answered %+v", c)
	}

	// disable and enable
	e.ok(t, "collections.disable.c1", "", &c)
	if c.Properties.State != job.CollectionDisabled {
		t.Fatalf("disable answered state %q", c.Properties.State)
	}
	e.ok(t, "collections.get.c1", "", &c)
	if c.Properties.State != job.CollectionDisabled {
		t.Fatalf("get after disable: state %q", c.Properties.State)
	}
	e.ok(t, "collections.enable.c1", "", &c)
	if c.Properties.State != job.CollectionEnabled {
		t.Fatalf("enable answered state %q", c.Properties.State)
	}

	// list, page by page, following nextLink
	e.putCollection(t, "c2", `{}`)
	e.putCollection(t, "c3", `{}`)
	var p page[job.Collection]
	msg = e.ok(t, "collections.list", `{"top": 2}`, &p)
	if got := collectionNames(p.Value); !slices.Equal(got, []string{"c1", "c2"}) || p.Count == nil || *p.Count != 3 {
		t.Fatalf("first page %v, count %v: want c1 and c2 of 3", got, p.Count)
	}
	link := nextLink(t, msg.Data)
	if link == "" || p.NextLink.Top != 2 || p.NextLink.After != "c2" || p.NextLink.Skip != 0 {
		t.Fatalf("first page nextLink %s, want a cursor after c2", link)
	}
	// A collection created before the cursor meanwhile moves nothing on the next page (an
	// offset would have answered c2 again).
	e.putCollection(t, "c0", `{}`)
	msg = e.ok(t, "collections.list", link, &p)
	if got := collectionNames(p.Value); !slices.Equal(got, []string{"c3"}) || nextLink(t, msg.Data) != "" {
		t.Fatalf("last page %v, nextLink %q", got, nextLink(t, msg.Data))
	}
	e.ok(t, "collections.list", `{"after": "c1"}`, &p)
	if got := collectionNames(p.Value); !slices.Equal(got, []string{"c2", "c3"}) {
		t.Fatalf("the page after c1: %v", got)
	}
	e.ok(t, "collections.delete.c0", "", nil)

	// delete
	msg = e.ok(t, "collections.delete.c2", "", nil)
	if string(msg.Data) != "{}" {
		t.Fatalf("delete answered %s", msg.Data)
	}
	e.fail(t, "collections.get.c2", "", "404", "ResourceNotFound")
	e.fail(t, "collections.delete.c2", "", "404", "ResourceNotFound")
	e.fail(t, "collections.enable.c2", "", "404", "ResourceNotFound")
	p = page[job.Collection]{}
	e.ok(t, "collections.list", "", &p)
	if got := collectionNames(p.Value); !slices.Equal(got, []string{"c1", "c3"}) || p.NextLink != nil {
		t.Fatalf("after delete: %v, nextLink %v", got, p.NextLink)
	}
}

// Deleting a collection deletes its jobs.
func TestDeleteCollectionDeletesJobs(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	e.ok(t, "collections.delete.c", "", nil)
	e.putCollection(t, "c", `{}`)
	e.fail(t, "jobs.get.c.j", "", "404", "ResourceNotFound")
}

// A large collection is disabled and enabled a bounded number of jobs a Redis call: one call
// for every job held Redis, and every planner's dispatch with it, for 1.2 s (disable) and
// 3.1 s (enable) with 300,000 jobs. Every job leaves the due set, then comes back to it.
func TestALargeCollectionChangesStateInBoundedCalls(t *testing.T) {
	e := newEnv(t)
	const n = 2500
	e.putBig(t, n)
	ctx := context.Background()
	far := t0.Add(24 * time.Hour)
	calls, _ := e.redis.ScriptCalls(t, func() { e.ok(t, "collections.disable.big", "", nil) })
	if due, _ := e.store.DueBacklog(ctx, far); due != 0 || calls < 3 {
		t.Errorf("disabled in %d script calls, %d jobs left due: want several calls, none due", calls, due)
	}
	calls, most := e.redis.ScriptCalls(t, func() { e.ok(t, "collections.enable.big", "", nil) })
	if due, _ := e.store.DueBacklog(ctx, far); due != n || calls < 3 || most > 4+1000 {
		t.Errorf("enabled in %d script calls, the largest with %d keys, %d jobs due: want several calls of 1,000 jobs at most, all %d due",
			calls, most, due, n)
	}
}

// putBig makes the collection big, of n hourly jobs j0000 and on.
func (e *env) putBig(t *testing.T, n int) {
	t.Helper()
	e.putCollection(t, "big", `{}`)
	apitest.BulkPut(t, e.nc, "big", n, func(i int) string { return fmt.Sprintf("j%04d", i) }, func(int) string { return hourly })
}
