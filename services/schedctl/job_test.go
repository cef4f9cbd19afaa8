package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/apitest"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// hourlyJob has a secret (the Basic password) and first runs long after the test.
const hourlyJob = `{"properties": {"startTime": "2099-01-01T00:00:00Z",
  "action": {"type": "Https", "request": {"uri": "https://example.com/hook", "method": "POST",
    "authentication": {"type": "Basic", "username": "u", "password": "s3cret-pass"}}},
  "recurrence": {"frequency": "Hour", "interval": 1}}}`

// onceJob is a one-time job put disabled.
const onceJob = `{"startTime": "2099-01-01T00:00:00Z", "state": "Disabled",
  "action": {"type": "Http", "request": {"uri": "http://example.com/", "method": "GET"}, "retryPolicy": {"retryType": "None"}}}`

func TestJobCommands(t *testing.T) {
	p := startPlanner(t)
	p.mustRun(t, "", "collection", "create", "c")
	file := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(file, []byte(hourlyJob), 0o600); err != nil {
		t.Fatal(err)
	}

	out := p.mustRun(t, "", "job", "create", "c/j1", "-f", file)
	want := "job c/j1 created\n" +
		"Name:        c/j1\n" +
		"State:       Enabled\n" +
		"Action:      Https POST https://example.com/hook (4 retries 30s apart)\n" +
		"Start:       2099-01-01T00:00:00Z\n" +
		"Schedule:    every hour\n" +
		"Next:        2099-01-01T00:00:00.000Z\n" +
		"Last:        -\n" +
		"Executions:  0\n" +
		"Failures:    0\n" +
		"Faulted:     0\n"
	if out != want {
		t.Fatalf("job create:\n%s\nwant:\n%s", out, want)
	}
	p.mustFail(t, "", 1, []string{"job c/j1 already exists: update it, or put it to replace it"}, "job", "create", "c/j1", "-f", file)
	huge := filepath.Join(t.TempDir(), "huge.json")
	if err := os.WriteFile(huge, []byte(`{"properties": {"action": {"type": "Http", "request": {"method": "POST",
		"uri": "http://localhost/", "body": "`+strings.Repeat("a", 2<<20)+`"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"put", "publish"} {
		p.mustFail(t, "", 1, []string{"more than the NATS server takes (1048576); a job definition may be at most 16 KiB"}, "job", verb, "c/huge", "-f", huge)
	}

	var d job.Definition
	code, out, errOut := p.schedctl(t, hourlyJob, "job", "put", "c", "j1", "-f", "-", "-o", "json")
	decode(t, out, &d)
	if code != 0 || d.Name != "c/j1" || d.Properties.Recurrence.Frequency != job.Hour || strings.Contains(out, "s3cret-pass") ||
		!strings.Contains(errOut, "note: a put replaces the whole job: its schedule starts again now") {
		t.Fatalf("job put of an existing job: exit %d, %s, stderr %q", code, out, errOut)
	}
	wantLines(t, p.mustRun(t, onceJob, "job", "put", "c/j2", "-f", "-"), "job c/j2 created",
		"State:  +Disabled", "Schedule:  +once", "Action:  +Http GET http://example.com/ (no retries)",
		"Executions:  +0", "Next:  +- (disabled)")
	if out := p.mustRun(t, "", "job", "get", "c/j1"); out != strings.TrimPrefix(want, "job c/j1 created\n") {
		t.Fatalf("job get:\n%s", out)
	}
	if out := p.mustRun(t, "", "job", "get", "c/j1", "-o", "yaml"); !strings.Contains(out, "name: c/j1\n") || !strings.Contains(out, "  recurrence:\n    frequency: Hour\n") {
		t.Fatalf("job get -o yaml:\n%s", out)
	}

	t.Run("create from flags", func(t *testing.T) {
		out := p.mustRun(t, "", "job", "create", "c/weekly", "--weekdays", "Mon,fri", "--hours", "9", "--minutes", "30",
			"--tz", "Europe/Paris", "--http-post", "https://example.com/report", "--body", `{"r":1}`,
			"--header", "Content-Type: application/json", "--header", "X-Team: ops", "--retry", "3@1m", "--count", "10",
			"--until", "2099-01-01T00:00:00Z", "--catch-up", "all")
		wantLines(t, out, "job c/weekly created", "State:  +Enabled",
			"Action:  +Https POST https://example.com/report (3 retries 1m apart)",
			"Schedule:  +every Monday and Friday at 09:30 (Europe/Paris), 10 times, until 2099-01-01T00:00:00Z, catch-up All")
		decode(t, p.mustRun(t, "", "job", "get", "c/weekly", "-o", "json"), &d)
		req := d.Properties.Action.Request
		s := d.Properties.Recurrence.Schedule
		if req.Body != `{"r":1}` || req.Headers["Content-Type"] != "application/json" || req.Headers["X-Team"] != "ops" ||
			d.Properties.StartTime == nil || d.Properties.StartTime.Second != 0 || s.Minutes[0] != 30 ||
			d.Properties.Action.RetryPolicy.Interval() != time.Minute || d.Properties.Action.RetryPolicy.RetryInterval.String() != "PT1M" {
			t.Fatalf("the job created from flags: %+v, request %+v", d.Properties, req)
		}
		if next := d.Properties.Status.NextExecutionTime; next == nil || !next.After(time.Now()) || next.Weekday() != time.Monday && next.Weekday() != time.Friday {
			t.Fatalf("next run %v: want the first Monday or Friday 09:30 after now, not an immediate run", next)
		}
		for _, c := range []struct {
			args []string
			line string
		}{
			{[]string{"--every", "15m", "--http-get", "http://x/a"}, "Schedule:  +every 15 minutes"},
			{[]string{"--monthly", "last-Fri,first-monday", "--hours", "17", "--http-delete", "http://x/b"}, "Schedule:  +every month on the last Friday and the 1st Monday at 17:00"},
			{[]string{"--month-days", "1,-1", "--hours", "6", "--minutes", "0", "--http-put", "http://x/c", "--disabled"}, "State:  +Disabled"},
			{[]string{"--months", "1,7", "--month-days", "15", "--hours", "8", "--http-patch", "http://x/d", "--retry", "none"}, "Action:  +Http PATCH http://x/d (no retries)"},
			{[]string{"--every", "2d", "--at", "2099-03-01T06:00", "--tz", "Pacific Standard Time", "--http-get", "http://x/e"}, "Start:  +2099-03-01T06:00:00"},
		} {
			name := "f" + string(rune('a'+len(c.line)%26)) + time.Now().Format("150405.000000000")[7:]
			wantLines(t, p.mustRun(t, "", append([]string{"job", "create", "c/" + strings.ReplaceAll(name, ".", "")}, c.args...)...), c.line)
		}
	})

	t.Run("create from flags: mistakes", func(t *testing.T) {
		for _, c := range []struct {
			code int
			args []string
			want string
		}{
			{2, []string{"--every", "15m"}, "the job needs an action"},
			{2, []string{"--http-get", "http://x/", "--count", "3"}, "need a frequency"},
			{2, []string{"--every", "15minutes", "--http-get", "http://x/"}, `--every: "15minutes"`},
			{2, []string{"--weekdays", "Mon,Funday", "--http-get", "http://x/"}, `"Funday" is not a day of the week`},
			{2, []string{"--hours", "9,x", "--http-get", "http://x/"}, `--hours: "x" is not a whole number`},
			{2, []string{"--every", "1h", "--http-get", "http://x/", "--http-post", "http://y/"}, "give one of --http-get"},
			{2, []string{"--every", "1h", "--http-get", "http://x/", "--header", "no colon"}, "write it as Name: value"},
			{2, []string{"--every", "1h", "--http-get", "http://x/", "--retry", "often"}, "--retry"},
			{2, []string{"--every", "1h", "--http-get", "http://x/", "-f", file}, "-f and the job flags exclude each other"},
			{2, []string{}, "give the job: -f FILE, or flags"},
			// The planner names the field.
			{2, []string{"--hours", "25", "--http-get", "http://x/"}, "recurrence.schedule.hours[0]"},
			{2, []string{"--every", "1d", "--tz", "Mars/Base", "--http-get", "http://x/"}, "recurrence.timeZone"},
			{2, []string{"--every", "1d", "--http-get", "ftp://x/"}, "action.request.uri"},
		} {
			p.mustFail(t, "", c.code, []string{c.want}, append([]string{"job", "create", "c/bad"}, c.args...)...)
		}
	})

	t.Run("update and patch change a part", func(t *testing.T) {
		out := p.mustRun(t, "", "job", "update", "c/weekly", "--hours", "10,17", "--body", "new")
		wantLines(t, out, "job c/weekly updated", "Schedule:  +every Monday and Friday at 10:30 and 17:30 (Europe/Paris), 10 times, until 2099-01-01T00:00:00Z, catch-up All")
		decode(t, p.mustRun(t, "", "job", "get", "c/weekly", "-o", "json"), &d)
		if d.Properties.Action.Request.Body != "new" || d.Properties.Action.Request.Headers["X-Team"] != "ops" {
			t.Fatalf("update changed more than it was told: %+v", d.Properties.Action.Request)
		}
		wantLines(t, p.mustRun(t, `{"recurrence": {"count": null}}`, "job", "patch", "c/weekly", "-f", "-"),
			"Schedule:  +every Monday and Friday at 10:30 and 17:30 (Europe/Paris), until 2099-01-01T00:00:00Z, catch-up All")
		wantLines(t, p.mustRun(t, `{"properties": {"recurrence": {"catchUpPolicy": null}}}`, "job", "update", "c/weekly", "-f", "-"),
			"Schedule:  +every Monday and Friday at 10:30 and 17:30 (Europe/Paris), until 2099-01-01T00:00:00Z")
		p.mustFail(t, "", 2, []string{"nothing to change"}, "job", "update", "c/weekly")
		p.mustFail(t, `{"recurrence": {"interval": 0}}`, 2, []string{"recurrence.interval"}, "job", "patch", "c/weekly", "-f", "-")
		p.mustFail(t, "", 1, []string{"job c/missing not found"}, "job", "update", "c/missing", "--hours", "3")
		p.mustFail(t, "", 2, []string{"-f is required"}, "job", "patch", "c/weekly")
	})

	t.Run("what -o yaml prints is put back with -f", func(t *testing.T) {
		// c/weekly has a retry interval in ISO form and times YAML would read as timestamps.
		yamlText := p.mustRun(t, "", "job", "get", "c/weekly", "-o", "yaml")
		p.mustRun(t, yamlText, "job", "put", "c/weekly-copy", "-f", "-")
		var orig, cp job.Definition
		decode(t, p.mustRun(t, "", "job", "get", "c/weekly", "-o", "json"), &orig)
		decode(t, p.mustRun(t, "", "job", "get", "c/weekly-copy", "-o", "json"), &cp)
		orig.Properties.Status, cp.Properties.Status = nil, nil
		a, _ := json.Marshal(orig.Properties)
		b, _ := json.Marshal(cp.Properties)
		if !bytes.Equal(a, b) {
			t.Fatalf("put back from YAML:\n%s\nwant\n%s", b, a)
		}
		// YAML that is not a mapping stays the planners' to refuse, as JSON.
		p.mustFail(t, "just words", 2, []string{"not valid JSON"}, "job", "put", "c/words", "-f", "-")
		p.mustFail(t, "action: [", 2, []string{"not valid JSON"}, "job", "put", "c/words", "-f", "-")
	})

	t.Run("describe shows the next runs and the last results", func(t *testing.T) {
		out := p.mustRun(t, "", "job", "describe", "c/j1", "-n", "3")
		wantLines(t, out, "Next runs:", "  2099-01-01T00:00:00.000Z", "  2099-01-01T01:00:00.000Z", "  2099-01-01T02:00:00.000Z",
			"Last results:", "  (none yet)")
		var all struct {
			Job      job.Definition  `json:"job"`
			NextRuns json.RawMessage `json:"nextRuns"`
		}
		decode(t, p.mustRun(t, "", "job", "describe", "c/j1", "-o", "json"), &all)
		if all.Job.Name != "c/j1" || !strings.Contains(string(all.NextRuns), "2099-01-01T04:00:00Z") {
			t.Fatalf("describe -o json: %+v", all)
		}
		wantLines(t, p.mustRun(t, "", "job", "describe", "c/j2"), "Next runs:", "  (no more: the job is Disabled)")
	})

	t.Run("list: effective states, across collections, filters", func(t *testing.T) {
		out := p.mustRun(t, "", "job", "list", "c", "--filter", "name~j*")
		wantLines(t, out, "NAME  STATE     SCHEDULE    ACTION  NEXT                      LAST  EXECUTIONS  FAILURES",
			"c/j1  Enabled   every hour  Https   2099-01-01T00:00:00.000Z  -     0           0",
			"c/j2  Disabled  once        Http    - (disabled)              -     0           0")
		p.mustRun(t, "", "collection", "create", "other")
		p.mustRun(t, "", "job", "create", "other/o1", "--every", "1h", "--at", "2099-01-01T00:00:00Z", "--http-get", "http://x/")
		p.mustRun(t, "", "collection", "disable", "other")
		out = p.mustRun(t, "", "job", "list", "--filter", "name~?1")
		wantLines(t, out, "c/j1      Enabled                     every hour  Https   2099-01-01T00:00:00.000Z  -     0           0",
			"other/o1  Paused (by its collection)  every hour  Http    - (paused)                -     0           0")
		if out := p.mustRun(t, "", "job", "list", "--filter", "state=paused", "--filter", "type=http"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "other/o1") {
			t.Fatalf("list --filter state=paused --filter type=http:\n%s", out)
		}
		if out := p.mustRun(t, "", "job", "list", "--filter", "collection=c", "--filter", "name~j*", "--state", "disabled"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "c/j2") {
			t.Fatalf("list --filter collection=c --state disabled:\n%s", out)
		}
		var page struct{ Value []job.Definition }
		decode(t, p.mustRun(t, "", "job", "list", "c", "--state", "Enabled", "--filter", "name=j1", "-o", "json"), &page)
		if len(page.Value) != 1 || page.Value[0].Name != "c/j1" {
			t.Fatalf("job list -o json: %+v", page)
		}
		p.mustFail(t, "", 2, []string{"invalid: state: unknown job state"}, "job", "list", "c", "--state", "Sleeping")
		p.mustFail(t, "", 1, []string{"job collection nowhere not found"}, "job", "list", "nowhere")
		p.mustRun(t, "", "collection", "enable", "other")
	})

	t.Run("an empty list says so on standard error, with no bare header", func(t *testing.T) {
		p.mustRun(t, "", "collection", "create", "empty")
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"job", "list", "empty"}, "No jobs in collection empty.\n"},
			{[]string{"job", "list", "c", "--filter", "name=none"}, "No job matches.\n"},
			{[]string{"job", "history", "c/j1"}, "No history yet for job c/j1.\n"},
			{[]string{"job", "history", "c/j1", "--status", "Failed"}, "No attempt of job c/j1 with status Failed.\n"},
			{[]string{"collection", "list", "--filter", "name=none"}, "No collection matches.\n"},
		} {
			code, stdout, stderr := p.schedctl(t, "", tc.args...)
			if code != 0 || stdout != "" || stderr != tc.want {
				t.Errorf("schedctl %s: exit %d, stdout %q, stderr %q; want 0, nothing, %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
			}
		}
		if out := p.mustRun(t, "", "job", "list", "empty", "-o", "json"); !strings.Contains(out, `"value": []`) {
			t.Errorf("job list -o json of an empty collection: %s", out)
		}
		p.mustRun(t, "", "collection", "delete", "empty", "--yes")
	})

	t.Run("disable, enable, run", func(t *testing.T) {
		wantLines(t, p.mustRun(t, "", "job", "disable", "c/j1"), "State:  +Disabled", "Executions:  +0")
		decode(t, p.mustRun(t, "", "job", "get", "c/j1", "-o", "json"), &d)
		if d.Properties.State != job.StateDisabled {
			t.Fatalf("get after disable: %q", d.Properties.State)
		}
		wantLines(t, p.mustRun(t, "", "job", "enable", "c/j1"), "State:  +Enabled", "Next:  +2099-01-01T00:00:00.000Z")
		if out := p.mustRun(t, "", "job", "run", "c/j1"); !strings.HasPrefix(out, "job c/j1: an occurrence is due now") {
			t.Fatalf("job run printed %q", out)
		}
		if out := p.mustRun(t, "", "job", "run", "c/j1", "-o", "json"); out != "{}\n" {
			t.Fatalf("job run -o json printed %q", out)
		}
	})

	t.Run("history, to the millisecond", func(t *testing.T) {
		long := "HTTP 500 Internal Server Error: " + strings.Repeat("x", 100)
		// A target chooses its reason phrase, headers and body, which the message holds:
		// escape sequences (set the terminal's title, clear the screen) and a right-to-left
		// override are shown, not played.
		const sly, shown = "HTTP 200 OK \x1b]0;PWNED\x07\x1b[2J\u202e", `HTTP 200 OK \x1b]0;PWNED\x07\x1b[2J\u202e`
		at := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
		publishResults(t, p, resultOf("j1", at, 0, job.ExecutionFailed, long), resultOf("j1", at, 1, job.ExecutionCompleted, sly))
		var page listReply
		testenv.Eventually(t, 10*time.Second, "the results in the history", func() bool {
			decode(t, p.mustRun(t, "", "job", "history", "c/j1", "-o", "json"), &page)
			return len(page.Value) == 2
		})
		expected := at.Format("2006-01-02T15:04:05.000Z07:00")
		started := func(attempt int) string {
			return at.Add(time.Duration(attempt)*time.Minute + 250*time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
		}
		want := "EXPECTED                  ACTION      ATTEMPT  STATUS     STARTED                   MESSAGE\n" +
			expected + "  MainAction  2        Completed  " + started(1) + "  " + shown + "\n" +
			expected + "  MainAction  1        Failed     " + started(0) + "  " + truncate(long, historyMessageWidth) + "\n"
		if out := p.mustRun(t, "", "job", "history", "c/j1"); out != want {
			t.Fatalf("job history:\n%s\nwant:\n%s", out, want)
		}
		out := p.mustRun(t, "", "job", "history", "c/j1", "--status", "Failed")
		if strings.Count(out, "\n") != 2 || !strings.Contains(out, "  Failed  ") {
			t.Fatalf("job history --status Failed:\n%s", out)
		}
		decode(t, p.mustRun(t, "", "job", "history", "c/j1", "--top", "1", "-o", "json"), &page)
		if len(page.Value) != 1 || page.NextLink == nil {
			t.Fatalf("job history --top 1 -o json: %+v", page)
		}
		wantLines(t, p.mustRun(t, "", "job", "describe", "c/j1", "-n", "1"), "Last results:",
			"  "+expected+"  MainAction  2  Completed  "+started(1)+"  "+shown)
	})

	t.Run("publish through the intake", func(t *testing.T) {
		// By default it waits for the planners' word on its own message and says it.
		if out := p.mustRun(t, onceJob, "job", "publish", "c/published", "-f", "-"); out != "job c/published: applied; no run is due (the job is disabled, or its series is over)\n" {
			t.Fatalf("job publish printed %q", out)
		}
		if code, _, _ := p.schedctl(t, "", "job", "get", "c/published"); code != 0 {
			t.Fatal("the published job is not there once applied")
		}
		p.mustFail(t, `{"properties": {"action": {"type": "Http"}, "recurrence": {"frequency": "Hour", "interval": 0}}}`, 2,
			[]string{"job c/published: the published definition was refused", "  recurrence.interval: must be at least 1"}, "job", "publish", "c/published", "-f", "-")
		var e bus.Event
		decode(t, p.mustRun(t, onceJob, "job", "publish", "c/published", "-f", "-", "-o", "json"), &e)
		if e.Kind != bus.EventAccepted || e.Job != "published" || e.IntakeSequence == 0 {
			t.Fatalf("job publish -o json: %+v", e)
		}
		if out := p.mustRun(t, "", "job", "publish", "c/published", "--delete"); out != "job c/published: deleted\n" {
			t.Fatalf("job publish --delete printed %q", out)
		}
		if code, _, _ := p.schedctl(t, "", "job", "get", "c/published"); code != 1 {
			t.Fatal("the job is still there once its delete is applied")
		}
		// The delete of a job that does not exist is reported as such (it once waited out --wait).
		if out := p.mustRun(t, "", "job", "publish", "c/ghost", "--delete", "--wait", "1m"); out != "job c/ghost: not found; nothing was deleted\n" {
			t.Fatalf("job publish --delete of a missing job printed %q", out)
		}
		var gone bus.Event
		decode(t, p.mustRun(t, "", "job", "publish", "c/ghost", "--delete", "-o", "json"), &gone)
		if gone.Kind != bus.EventDeleted || !gone.NotFound || gone.IntakeSequence == 0 {
			t.Fatalf("job publish --delete -o json of a missing job: %+v", gone)
		}
		// Without waiting, it says where the refusals come.
		out := p.mustRun(t, onceJob, "job", "publish", "c/published", "-f", "-", "--wait", "0")
		if !strings.Contains(out, "published on scheduler.jobs.c.published; refusals come on scheduler.events.c.published.rejected") {
			t.Fatalf("job publish --wait 0 printed %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "the published job", func() bool {
			code, _, _ := p.schedctl(t, "", "job", "get", "c/published")
			return code == 0
		})
		p.mustFail(t, "", 2, []string{"give -f FILE, or --delete"}, "job", "publish", "c/x")

		// Redis full: it says why the definition waits, and the definition is applied after.
		rdb := p.redis.Client(t)
		if err := rdb.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		out = p.mustRun(t, onceJob, "job", "publish", "c/waiting", "-f", "-")
		if err := rdb.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "job c/waiting: definition published; the planners cannot store it now (Redis is out of memory (its maxmemory)") ||
			!strings.HasSuffix(out, "it waits on the intake stream and is applied once they can\n") {
			t.Fatalf("job publish while Redis is full printed %q", out)
		}
		testenv.Eventually(t, 10*time.Second, "the waiting job applied once memory is freed", func() bool {
			code, _, _ := p.schedctl(t, "", "job", "get", "c/waiting")
			return code == 0
		})
	})

	t.Run("delete asks first, then not found", func(t *testing.T) {
		p.mustFail(t, "", 1, []string{"Delete job c/j2 and its history? [y/N]", "add --yes"}, "job", "delete", "c/j2")
		p.mustFail(t, "no\n", 1, []string{"not confirmed: nothing done"}, "job", "delete", "c/j2")
		if out := p.mustRun(t, "y\n", "job", "delete", "c/j2"); out != "job c/j2 deleted\n" {
			t.Fatalf("job delete printed %q", out)
		}
		p.mustFail(t, "", 1, []string{"schedctl: ", "not found"}, "job", "get", "c/j2")
		p.mustFail(t, "", 1, []string{"not found"}, "job", "delete", "c/j2", "--yes")
		p.mustFail(t, hourlyJob, 1, []string{"nowhere"}, "job", "put", "nowhere/j", "-f", "-")
	})

	t.Run("the planner rejects fields", func(t *testing.T) {
		bad := strings.Replace(hourlyJob, `"interval": 1`, `"interval": 0`, 1)
		code, out, errOut := p.schedctl(t, bad, "job", "put", "c/bad", "-f", "-")
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "schedctl: the definition is invalid\n") ||
			!strings.Contains(errOut, "\n  recurrence.interval: ") {
			t.Fatalf("invalid job: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		typo := strings.Replace(hourlyJob, `"recurrence"`, `"recurence"`, 1)
		p.mustFail(t, typo, 2, []string{"recurence"}, "job", "create", "c/typo", "-f", "-")
		p.mustFail(t, "", 2, []string{`job name "bad.name"`}, "job", "get", "c/bad.name")
		p.mustFail(t, "", 2, []string{`"c": name the job as COLLECTION/JOB`}, "job", "get", "c")
		// A request refused for one field says it once.
		code, _, errOut = p.schedctl(t, "", "job", "history", "c/j1", "--status", "Exploded")
		if want := "schedctl: the request is invalid: status: unknown execution status \"Exploded\": must be one of Completed, Failed, Postponed, Skipped\n"; code != 2 || errOut != want {
			t.Fatalf("history with an unknown status: exit %d, stderr %q, want %q", code, errOut, want)
		}
	})

	t.Run("global flags anywhere", func(t *testing.T) {
		for _, args := range [][]string{
			{"job", "-o", "json", "get", "c/j1"},
			{"job", "get", "-o", "json", "c/j1"},
			{"job", "get", "c/j1", "--output=json"},
			hoistGlobalFlags([]string{"-o", "json", "job", "get", "c/j1"}),
		} {
			d = job.Definition{}
			decode(t, p.mustRun(t, "", args...), &d)
			if d.Name != "c/j1" {
				t.Fatalf("schedctl %v answered %+v", args, d)
			}
		}
	})
}

// resultOf is a worker's report of an attempt at c/<j>'s occurrence at. The planner keeps 60
// days of history by its own clock, so at must be recent.
func resultOf(j string, at time.Time, attempt int, status job.ExecutionStatus, message string) bus.Result {
	start := at.Add(time.Duration(attempt)*time.Minute + 250*time.Millisecond)
	return bus.Result{Collection: "c", Job: j, Scheduled: at, ExecutionTag: bus.ExecutionTag("c", j, 0, at),
		Occurrence: 1, ActionName: job.ActionNameMain, Attempt: attempt, StartTime: start, EndTime: start.Add(time.Second),
		Status: status, Message: message, MainDone: status == job.ExecutionCompleted, Final: status == job.ExecutionCompleted}
}

// publishResults reports attempts as a worker does, into the planner's results stream.
func publishResults(t *testing.T, p *planner, rs ...bus.Result) {
	t.Helper()
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	subjects := bus.NewSubjects("")
	for _, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(context.Background(), subjects.Result(r.Collection, r.Job), b); err != nil {
			t.Fatalf("publish a result: %v", err)
		}
	}
}

// A published change the planners applied after a later one says so, rather than that it
// waits on the intake stream (it is gone from it).
func TestPublishOutcomeOfAChangeSuperseded(t *testing.T) {
	var out strings.Builder
	inv := newInvocation("job publish", "", nil, &out, io.Discard)
	inv.output = "table"
	e := &bus.Event{Kind: bus.EventSuperseded, Collection: "c", Job: "j", IntakeSequence: 7}
	if err := publishOutcome(inv, "c/j", "definition", e, time.Second, "scheduler.events.c.j.rejected"); err != nil {
		t.Fatal(err)
	}
	if want := "job c/j: definition published; it changed nothing: a later change to the job, published after it, was applied first, and the job is as that one says\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}

// A state filter over a large collection: the planner reads a bounded part a request, so a
// page may hold no job; it says so with how to go on, and --all goes on to the end.
func TestJobListFilterOverALargeCollection(t *testing.T) {
	p := startPlanner(t)
	p.mustRun(t, "", "collection", "create", "big")
	apitest.BulkPut(t, p.nc, "big", 12_000, func(i int) string { return fmt.Sprintf("j%05d", i) }, func(i int) string {
		state := ""
		if i == 11_500 {
			state = `"state": "Disabled", `
		}
		return `{` + state + `"startTime": "2099-01-01T00:00:00Z", "action": {"type": "Http", "request": {"uri": "http://x/", "method": "GET"}}}`
	})
	code, out, errOut := p.schedctl(t, "", "job", "list", "big", "--state", "Disabled")
	after, found := strings.CutPrefix(strings.TrimSpace(errOut), "None in the part read (more: add --after ")
	after, _, _ = strings.Cut(after, ",")
	if code != 0 || out != "" || !found || after >= "j11500" {
		t.Fatalf("job list --state Disabled: exit %d\n%s\nstderr %q; want no row and how to go on", code, out, errOut)
	}
	if out := p.mustRun(t, "", "job", "list", "big", "--state", "Disabled", "--after", after); !strings.Contains(out, "big/j11500 ") {
		t.Errorf("job list --after %s:\n%s", after, out)
	}
	if out := p.mustRun(t, "", "job", "list", "big", "--state", "Disabled", "--all"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "big/j11500 ") {
		t.Errorf("job list --state Disabled --all:\n%s", out)
	}
}
