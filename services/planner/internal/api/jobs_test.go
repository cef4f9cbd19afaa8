package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/tlstest"
	"github.com/resched/resched/services/planner/internal/api"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

func jobNames(ds []job.Definition) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

func next(d job.Definition) string {
	if d.Properties.Status == nil || d.Properties.Status.NextExecutionTime == nil {
		return ""
	}
	return d.Properties.Status.NextExecutionTime.UTC().Format(time.RFC3339)
}

func TestJobLifecycle(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)

	var d job.Definition
	msg := e.ok(t, "jobs.put.c.j1", hourly, &d)
	if msg.Header.Get(api.HeaderCreated) != "true" {
		t.Fatalf("first put: created header %q", msg.Header.Get(api.HeaderCreated))
	}
	if d.Name != "c/j1" || d.ID != "/jobCollections/c/jobs/j1" || d.Properties.State != job.StateEnabled ||
		next(d) != "2024-01-02T00:00:00Z" || d.Properties.Recurrence.Frequency != job.Hour {
		t.Fatalf("put answered %+v (next %s)", d, next(d))
	}
	if strings.Contains(string(msg.Data), secret) {
		t.Fatalf("put answered the secret: %s", msg.Data)
	}
	d = job.Definition{}
	msg = e.ok(t, "jobs.put.c.j1", hourly, &d)
	if msg.Header.Get(api.HeaderCreated) != "false" {
		t.Fatalf("second put: created header %q", msg.Header.Get(api.HeaderCreated))
	}
	d = job.Definition{}
	msg = e.ok(t, "jobs.get.c.j1", "", &d)
	if d.Name != "c/j1" || next(d) != "2024-01-02T00:00:00Z" || strings.Contains(string(msg.Data), secret) {
		t.Fatalf("get answered %s", msg.Data)
	}
	stored, err := e.store.GetJob(context.Background(), "c", "j1")
	if err != nil || !strings.Contains(string(stored.Definition), secret) {
		t.Fatalf("the secret must be stored for the workers: %v", err)
	}

	// a disabled job, then the state filter in any casing
	disabled := strings.Replace(hourly, `"startTime"`, `"state": "Disabled", "startTime"`, 1)
	d = job.Definition{}
	e.ok(t, "jobs.put.c.j2", disabled, &d)
	if d.Properties.State != job.StateDisabled {
		t.Fatalf("put disabled answered state %q", d.Properties.State)
	}
	for _, tc := range []struct{ body, want string }{
		{``, "[c/j1 c/j2]"},
		{`{"state": "disabled"}`, "[c/j2]"},
		{`{"state": "ENABLED"}`, "[c/j1]"},
		{`{"state": "Faulted"}`, "[]"},
	} {
		var p page[job.Definition]
		e.ok(t, "jobs.list.c", tc.body, &p)
		if got := jobNames(p.Value); "["+strings.Join(got, " ")+"]" != tc.want || p.NextLink != nil {
			t.Fatalf("list %s: %v, nextLink %v; want %s", tc.body, got, p.NextLink, tc.want)
		}
	}

	// paging with nextLink
	var p page[job.Definition]
	msg = e.ok(t, "jobs.list.c", `{"top": 1}`, &p)
	if got := jobNames(p.Value); !slices.Equal(got, []string{"c/j1"}) || nextLink(t, msg.Data) == "" {
		t.Fatalf("first page %v, nextLink %s", got, nextLink(t, msg.Data))
	}
	if strings.Contains(string(msg.Data), secret) {
		t.Fatalf("list answered the secret: %s", msg.Data)
	}
	p = page[job.Definition]{}
	msg = e.ok(t, "jobs.list.c", nextLink(t, msg.Data), &p)
	if got := jobNames(p.Value); !slices.Equal(got, []string{"c/j2"}) || nextLink(t, msg.Data) != "" {
		t.Fatalf("second page %v, nextLink %s", got, nextLink(t, msg.Data))
	}

	// enable by patch: the schedule resumes
	d = job.Definition{}
	e.ok(t, "jobs.patch.c.j2", `{"properties": {"state": "Enabled"}}`, &d)
	if d.Properties.State != job.StateEnabled || next(d) != "2024-01-02T00:00:00Z" {
		t.Fatalf("patch to Enabled answered state %q next %q", d.Properties.State, next(d))
	}

	// delete
	msg = e.ok(t, "jobs.delete.c.j1", "", nil)
	if string(msg.Data) != "{}" {
		t.Fatalf("delete answered %s", msg.Data)
	}
	e.fail(t, "jobs.get.c.j1", "", "404", "ResourceNotFound")
	e.fail(t, "jobs.delete.c.j1", "", "404", "ResourceNotFound")
	p = page[job.Definition]{}
	e.ok(t, "jobs.list.c", "", &p)
	if got := jobNames(p.Value); !slices.Equal(got, []string{"c/j2"}) {
		t.Fatalf("after delete: %v", got)
	}
}

// A PATCH merges deeply: changing startTime keeps the recurrence's count and endTime.
func TestPatchMergesDeeply(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", `{"startTime": "2024-01-02T00:00:00Z",
	  "action": {"type": "Http", "request": {"uri": "http://localhost/hook", "method": "POST", "headers": {"A": "1"}}},
	  "recurrence": {"frequency": "Day", "count": 5, "endTime": "2024-02-01T00:00:00Z"}}`, nil)

	var d job.Definition
	e.ok(t, "jobs.patch.c.j", `{"startTime": "2024-01-03T06:00:00Z"}`, &d)
	p := d.Properties
	if p.StartTime.String() != "2024-01-03T06:00:00Z" || p.Recurrence.Frequency != job.Day || p.Recurrence.Count != 5 ||
		p.Recurrence.EndTime == nil || p.Recurrence.EndTime.String() != "2024-02-01T00:00:00Z" || next(d) != "2024-01-03T06:00:00Z" {
		t.Fatalf("patch of startTime answered %+v (recurrence %+v, next %s)", p, p.Recurrence, next(d))
	}
	// nested objects merge too; null removes a field
	d = job.Definition{}
	e.ok(t, "jobs.patch.c.j", `{"properties": {"action": {"request": {"headers": {"B": "2"}}}, "recurrence": {"endTime": null}}}`, &d)
	p = d.Properties
	h := p.Action.Request.Headers
	if h["A"] != "1" || h["B"] != "2" || p.Action.Request.URI != "http://localhost/hook" ||
		p.Recurrence.Count != 5 || p.Recurrence.EndTime != nil {
		t.Fatalf("nested patch answered headers %v, recurrence %+v", h, p.Recurrence)
	}
	d = job.Definition{}
	e.ok(t, "jobs.get.c.j", "", &d)
	if d.Properties.Recurrence.Count != 5 || d.Properties.Action.Request.Headers["B"] != "2" {
		t.Fatalf("the patch was not stored: %+v", d.Properties)
	}
}

func TestHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	entry := func(ago time.Duration, status job.ExecutionStatus) job.HistoryEntry {
		at := t0.Add(-ago)
		return job.HistoryEntry{StartTime: at, EndTime: at.Add(time.Second), ExpectedExecutionTime: at,
			ActionName: job.ActionNameMain, Status: status, RepeatCount: 1}
	}
	if err := e.store.AppendHistory(ctx, "c", "j", entry(4*time.Hour, job.ExecutionCompleted),
		entry(3*time.Hour, job.ExecutionFailed), entry(2*time.Hour, job.ExecutionCompleted)); err != nil {
		t.Fatal(err)
	}
	last := entry(time.Hour, job.ExecutionFailed)
	if _, err := e.store.ApplyResult(ctx, "c", "j", store.Outcome{Entry: last, Scheduled: last.ExpectedExecutionTime, Occurrence: 1, MainDone: true}, t0); err != nil {
		t.Fatal(err)
	}
	ages := func(es []job.HistoryEntry) []time.Duration {
		var out []time.Duration
		for _, x := range es {
			out = append(out, t0.Sub(x.StartTime))
		}
		return out
	}
	h := time.Hour
	for _, tc := range []struct {
		body     string
		want     []time.Duration
		nextLink bool
	}{
		{``, []time.Duration{h, 2 * h, 3 * h, 4 * h}, false}, // newest first
		{`{"status": "failed"}`, []time.Duration{h, 3 * h}, false},
		{`{"status": "Completed", "top": 1}`, []time.Duration{2 * h}, true},
		{`{"status": "Completed", "top": 1, "skip": 1}`, []time.Duration{4 * h}, false},
		{`{"top": 2, "skip": 1}`, []time.Duration{2 * h, 3 * h}, true},
		{`{"status": "Postponed"}`, nil, false},
	} {
		var p page[job.HistoryEntry]
		msg := e.ok(t, "jobs.history.c.j", tc.body, &p)
		if got := ages(p.Value); !slices.Equal(got, tc.want) || (nextLink(t, msg.Data) != "") != tc.nextLink {
			t.Errorf("history %s: ages %v nextLink %q; want %v, a nextLink: %v", tc.body, got, nextLink(t, msg.Data), tc.want, tc.nextLink)
		}
	}
	var d job.Definition
	e.ok(t, "jobs.get.c.j", "", &d)
	if d.Properties.Status.ExecutionCount != 1 || d.Properties.Status.FailureCount != 1 {
		t.Fatalf("the applied result must count: status %+v", d.Properties.Status)
	}
	e.fail(t, "jobs.history.c.missing", "", "404", "ResourceNotFound")
}

func TestRunNow(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	msg := e.ok(t, "jobs.run.c.j", "", nil)
	if string(msg.Data) != "{}" || !slices.Equal(e.runner.ran(), []string{"c/j"}) {
		t.Fatalf("run answered %s, runner saw %v", msg.Data, e.runner.ran())
	}
	e.fail(t, "jobs.run.c.missing", "", "404", "ResourceNotFound")
	if got := e.runner.ran(); len(got) != 1 {
		t.Fatalf("a missing job must not run: runner saw %v", got)
	}
}

func TestPreview(t *testing.T) {
	e := newEnv(t)
	const action = `"action": {"type": "Http", "request": {"uri": "http://localhost/hook", "method": "GET"}}`
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"count from acceptance (docs/recurrence.md §9)",
			`{"now": "2024-01-01T11:00:00Z", "count": 10, "job": {"startTime": "2020-01-01T10:00:00Z", ` + action +
				`, "recurrence": {"frequency": "Day", "count": 3}}}`,
			[]string{"2024-01-02T10:00:00Z", "2024-01-03T10:00:00Z", "2024-01-04T10:00:00Z"}},
		{"weekly, future start, zone (docs/recurrence.md §9)",
			`{"now": "2020-09-04T17:00:00Z", "count": 4, "job": {"properties": {"startTime": "2020-09-18T08:00:00", ` + action +
				`, "recurrence": {"frequency": "Week", "timeZone": "Pacific Standard Time",
				  "schedule": {"weekDays": ["Monday"], "hours": [10, 12, 14], "minutes": [30]}}}}}`,
			[]string{"2020-09-21T17:30:00Z", "2020-09-21T19:30:00Z", "2020-09-21T21:30:00Z", "2020-09-28T17:30:00Z"}},
		{"without now: the planner's clock",
			`{"job": {` + action + `}}`,
			[]string{"2024-01-01T11:00:00Z"}},
		{"a schedule alone, without an action",
			`{"now": "2023-12-31T00:00:00Z", "count": 3, "job": {"Properties": {"startTime": "2024-01-31T09:00:00Z", "recurrence": {"frequency": "Month"}}}}`,
			[]string{"2024-01-31T09:00:00Z", "2024-03-31T09:00:00Z", "2024-05-31T09:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got struct{ Value []string }
			e.ok(t, "preview", tc.body, &got)
			if !slices.Equal(got.Value, tc.want) {
				t.Fatalf("preview %v, want %v", got.Value, tc.want)
			}
		})
	}
	a := e.fail(t, "preview", `{"job": {`+action+`, "recurrence": {"frequency": "Day", "interval": 0}}}`, "400", "BadRequest")
	if !slices.Contains(a.paths(), "recurrence.interval") {
		t.Fatalf("invalid job: paths %v", a.paths())
	}
	// An action that is given is checked, as a put would.
	a = e.fail(t, "preview", `{"job": {"action": {"type": "Http", "request": {"uri": "ftp://x/", "method": "GET"}}}}`, "400", "BadRequest")
	if !slices.Contains(a.paths(), "action.request.uri") {
		t.Fatalf("invalid action: paths %v", a.paths())
	}
}

// jobs.runs lists a stored job's next runs from its own anchor and count, and says why the
// list ends early; a put with If-None-Match: * only creates.
func TestRunsAndCreateOnly(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", `{"startTime":"2024-01-02T00:00:00Z","action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},
		"recurrence":{"frequency":"Day","count":3}}`, nil)
	var runs struct {
		Value  []time.Time `json:"value"`
		Reason string      `json:"reason"`
	}
	e.ok(t, "jobs.runs.c.j", `{"count": 5}`, &runs)
	if len(runs.Value) != 3 || !runs.Value[2].Equal(time.Date(2024, 1, 4, 0, 0, 0, 0, time.UTC)) || runs.Reason != "recurrence.count reached" {
		t.Fatalf("runs %+v", runs)
	}
	e.ok(t, "collections.disable.c", "", nil)
	if e.ok(t, "jobs.runs.c.j", "", &runs); len(runs.Value) != 0 || !strings.Contains(runs.Reason, "collection is disabled") {
		t.Fatalf("runs of a job of a disabled collection %+v", runs)
	}
	msg := nats.NewMsg("scheduler.api.jobs.put.c.j")
	msg.Header.Set("If-None-Match", "*")
	msg.Data = []byte(hourly)
	reply, err := e.nc.RequestMsg(msg, 5*time.Second)
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "409" || !strings.Contains(string(reply.Data), "already exists") {
		t.Fatalf("create-only put of an existing job: %v %v %s", err, reply.Header, reply.Data)
	}
	msg.Subject = "scheduler.api.collections.put.c"
	msg.Data = []byte(`{}`)
	if reply, err = e.nc.RequestMsg(msg, 5*time.Second); err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "409" {
		t.Fatalf("create-only put of an existing collection: %v %s", err, reply.Data)
	}
}

// Puts that arrive together are written in batches (jobs.putBatcher); each still gets its own
// answer: created or replaced, its own job in the reply, its own refusal.
func TestConcurrentPutsEachGetTheirOwnAnswer(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	type call struct {
		subject, body string
		createOnly    bool
		status        string // the error status expected; "" for a success
	}
	job := func(interval int) string {
		return fmt.Sprintf(`{"action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},"recurrence":{"frequency":"Hour","interval":%d}}`, interval)
	}
	var calls []call
	for i := range 16 {
		calls = append(calls, call{subject: fmt.Sprintf("jobs.put.c.j%d", i), body: job(i + 1)})
		calls = append(calls, call{subject: "jobs.put.c.same", body: job(i + 1)})
	}
	for range 8 {
		calls = append(calls, call{subject: "jobs.put.c.once", body: job(1), createOnly: true, status: "409?"})
		calls = append(calls, call{subject: "jobs.put.c.bad", body: `{"recurrence":{"frequency":"Hour"}}`, status: "400"})
		calls = append(calls, call{subject: "jobs.put.nope.j", body: job(1), status: "404"})
	}
	replies := make([]*nats.Msg, len(calls))
	errs := make([]error, len(calls))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			msg := nats.NewMsg("scheduler.api." + c.subject)
			msg.Data = []byte(c.body)
			if c.createOnly {
				msg.Header.Set("If-None-Match", "*")
			}
			<-start
			replies[i], errs[i] = e.nc.RequestMsg(msg, 10*time.Second)
		})
	}
	close(start)
	wg.Wait()

	created := map[string]int{}
	conflicts := 0
	for i, c := range calls {
		if errs[i] != nil {
			t.Fatalf("%s: %v", c.subject, errs[i])
		}
		r := replies[i]
		status := r.Header.Get(micro.ErrorCodeHeader)
		switch {
		case c.status == "409?" && status == "409":
			conflicts++
			continue
		case c.status == "409?" && status == "":
		case status != c.status:
			t.Errorf("%s: status %q (%s), want %q", c.subject, status, r.Data, c.status)
			continue
		}
		if status != "" {
			continue
		}
		var d struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(c.subject, "jobs.put.")
		if d.Name != strings.Replace(name, ".", "/", 1) {
			t.Errorf("%s: the reply is about %q", c.subject, d.Name)
		}
		if r.Header.Get(api.HeaderCreated) == "true" {
			created[name]++
		}
	}
	for i := range 16 {
		if n := created[fmt.Sprintf("c.j%d", i)]; n != 1 {
			t.Errorf("c.j%d created %d times, want 1", i, n)
		}
	}
	if created["c.same"] != 1 || created["c.once"] != 1 || conflicts != 7 {
		t.Errorf("same created %d times, once %d times with %d conflicts: want 1, 1 and 7", created["c.same"], created["c.once"], conflicts)
	}
	var j struct {
		Properties struct {
			Recurrence struct {
				Interval int `json:"interval"`
			} `json:"recurrence"`
		} `json:"properties"`
	}
	e.ok(t, "jobs.get.c.j7", "", &j)
	if j.Properties.Recurrence.Interval != 8 {
		t.Errorf("c/j7 has interval %d, want its own put's 8", j.Properties.Recurrence.Interval)
	}
	e.fail(t, "jobs.get.c.bad", "", "404", "ResourceNotFound")
}

// A put answers with the job as stored, without reading it back: the answer is what a get
// right after returns, for every kind of job, for a job put again after it ran (its counters
// kept) and in a disabled collection.
func TestPutAnswersWhatAGetReturns(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.putCollection(t, "c", `{}`)
	e.putCollection(t, "off", `{}`)
	e.ok(t, "collections.disable.off", "", nil)
	pfx := tlstest.PFX(t, "right")
	puts := []struct{ coll, job, body string }{
		{"c", "hourly", hourly},
		{"c", "once", `{"startTime":"2024-01-01T12:00:00Z","action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}}}`},
		{"c", "disabled", `{"state":"Disabled","action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},"recurrence":{"frequency":"Minute"}}`},
		{"c", "over", `{"startTime":"2023-01-01T00:00:00Z","action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},
			"recurrence":{"frequency":"Day","endTime":"2023-02-01T00:00:00Z"}}`},
		{"c", "cert", `{"action":{"type":"Https","request":{"uri":"https://x/","method":"POST",
			"authentication":{"type":"ClientCertificate","pfx":"` + pfx + `","password":"right"}}},
			"recurrence":{"frequency":"Week","schedule":{"weekDays":["Monday"],"hours":[9],"minutes":[30]}}}`},
		{"c", "queue", `{"action":{"type":"StorageQueue","queueMessage":{"storageAccount":"acct","queueName":"jobs-q","sasToken":"?sv=1&sig=s3cret","message":"m"}},
			"recurrence":{"frequency":"Hour","interval":2}}`},
		{"off", "j", hourly},
	}
	check := func() {
		for _, p := range puts {
			put := e.ok(t, "jobs.put."+p.coll+"."+p.job, p.body, nil)
			get := e.ok(t, "jobs.get."+p.coll+"."+p.job, "", nil)
			if string(put.Data) != string(get.Data) {
				t.Errorf("%s/%s: put answered\n%s\nget returns\n%s", p.coll, p.job, put.Data, get.Data)
			}
		}
	}
	check()
	at := t0.Add(-time.Hour)
	entry := job.HistoryEntry{StartTime: at, EndTime: at.Add(time.Second), ExpectedExecutionTime: at, ActionName: job.ActionNameMain,
		Status: job.ExecutionFailed, RepeatCount: 1}
	if _, err := e.store.ApplyResult(ctx, "c", "hourly", store.Outcome{ID: "r1", Entry: entry, Scheduled: at, Occurrence: 1,
		MainDone: true, Final: true, Faulted: true}, t0); err != nil {
		t.Fatal(err)
	}
	check() // put again, with counters and a last execution
	var d job.Definition
	e.ok(t, "jobs.get.c.hourly", "", &d)
	if st := d.Properties.Status; st == nil || st.ExecutionCount != 1 || st.FailureCount != 1 || st.FaultedCount != 1 || st.LastExecutionTime == nil {
		t.Fatalf("the job put again keeps its counters: status %+v", st)
	}
}
