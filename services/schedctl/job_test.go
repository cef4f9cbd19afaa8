package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

	out := p.mustRun(t, "", "job", "put", "c/j1", "-f", file)
	want := "job c/j1 created\n" +
		"Name:        c/j1\n" +
		"State:       Enabled\n" +
		"Action:      Https POST https://example.com/hook (4 retries 30s apart)\n" +
		"Start:       2099-01-01T00:00:00Z\n" +
		"Recurrence:  every 1 Hour\n" +
		"Next:        2099-01-01T00:00:00Z\n" +
		"Last:        -\n" +
		"Executions:  0\n" +
		"Failures:    0\n" +
		"Faulted:     0\n"
	if out != want {
		t.Fatalf("job put:\n%s\nwant:\n%s", out, want)
	}
	var d job.Definition
	out = p.mustRun(t, hourlyJob, "job", "put", "c", "j1", "-f", "-", "-o", "json")
	decode(t, out, &d)
	if d.Name != "c/j1" || d.Properties.Recurrence.Frequency != job.Hour || strings.Contains(out, "s3cret-pass") {
		t.Fatalf("job put c j1 -o json answered %s", out)
	}
	wantLines(t, p.mustRun(t, onceJob, "job", "put", "c/j2", "-f", "-"), "job c/j2 created",
		"State:  +Disabled", "Recurrence:  +once", "Action:  +Http GET http://example.com/ (no retries)")
	if out := p.mustRun(t, "", "job", "get", "c/j1"); out != strings.TrimPrefix(want, "job c/j1 created\n") {
		t.Fatalf("job get:\n%s", out)
	}

	t.Run("list", func(t *testing.T) {
		out := p.mustRun(t, "", "job", "list", "c")
		wantLines(t, out, "NAME  STATE     RECURRENCE  NEXT                  LAST  EXECUTIONS  FAILURES",
			"c/j1  Enabled   Hour/1      2099-01-01T00:00:00Z  -     0           0")
		if !strings.Contains(out, "\nc/j2  Disabled  once ") || strings.Count(out, "\n") != 3 {
			t.Fatalf("job list:\n%s", out)
		}
		out = p.mustRun(t, "", "job", "list", "c", "--state", "disabled")
		if strings.Count(out, "\n") != 2 || !strings.Contains(out, "\nc/j2 ") {
			t.Fatalf("job list --state disabled:\n%s", out)
		}
		var page struct{ Value []job.Definition }
		decode(t, p.mustRun(t, "", "job", "list", "c", "--state", "Enabled", "-o", "json"), &page)
		if len(page.Value) != 1 || page.Value[0].Name != "c/j1" {
			t.Fatalf("job list --state Enabled -o json: %+v", page)
		}
		code, _, errOut := p.schedctl(t, "", "job", "list", "c", "--state", "Sleeping")
		if code != 2 || !strings.Contains(errOut, "\n  state: ") {
			t.Fatalf("an unknown state: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("disable, enable, run", func(t *testing.T) {
		wantLines(t, p.mustRun(t, "", "job", "disable", "c/j1"), "State:  +Disabled")
		decode(t, p.mustRun(t, "", "job", "get", "c/j1", "-o", "json"), &d)
		if d.Properties.State != job.StateDisabled {
			t.Fatalf("get after disable: %q", d.Properties.State)
		}
		wantLines(t, p.mustRun(t, "", "job", "enable", "c/j1"), "State:  +Enabled", "Next:  +2099-01-01T00:00:00Z")
		if out := p.mustRun(t, "", "job", "run", "c/j1"); !strings.HasPrefix(out, "job c/j1: an occurrence is due now") {
			t.Fatalf("job run printed %q", out)
		}
		if out := p.mustRun(t, "", "job", "run", "c/j1", "-o", "json"); out != "{}\n" {
			t.Fatalf("job run -o json printed %q", out)
		}
	})

	t.Run("history", func(t *testing.T) {
		long := "HTTP 500 Internal Server Error: " + strings.Repeat("x", 100)
		at := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
		publishResults(t, p, resultOf("j1", at, 0, job.ExecutionFailed, long), resultOf("j1", at, 1, job.ExecutionCompleted, "HTTP 200 OK"))
		var page listReply
		testenv.Eventually(t, 10*time.Second, "the results in the history", func() bool {
			decode(t, p.mustRun(t, "", "job", "history", "c/j1", "-o", "json"), &page)
			return len(page.Value) == 2
		})
		expected := at.Format(time.RFC3339)
		want := "EXPECTED              ACTION      ATTEMPT  STATUS     MESSAGE\n" +
			expected + "  MainAction  2        Completed  HTTP 200 OK\n" +
			expected + "  MainAction  1        Failed     " + truncate(long, historyMessageWidth) + "\n"
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
	})

	t.Run("delete, then not found", func(t *testing.T) {
		if out := p.mustRun(t, "", "job", "delete", "c/j2"); out != "job c/j2 deleted\n" {
			t.Fatalf("job delete printed %q", out)
		}
		code, out, errOut := p.schedctl(t, "", "job", "get", "c/j2")
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "schedctl: ") || !strings.Contains(errOut, "not found") {
			t.Fatalf("get of a deleted job: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		code, _, errOut = p.schedctl(t, hourlyJob, "job", "put", "nowhere/j", "-f", "-")
		if code != 1 || !strings.Contains(errOut, "nowhere") {
			t.Fatalf("put into a missing collection: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("the planner rejects fields", func(t *testing.T) {
		bad := strings.Replace(hourlyJob, `"interval": 1`, `"interval": 0`, 1)
		code, out, errOut := p.schedctl(t, bad, "job", "put", "c/bad", "-f", "-")
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "schedctl: the definition is invalid\n") ||
			!strings.Contains(errOut, "\n  recurrence.interval: ") {
			t.Fatalf("invalid job: exit %d, stdout %q, stderr %q", code, out, errOut)
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
	return bus.Result{Collection: "c", Job: j, Scheduled: at, ExecutionTag: bus.ExecutionTag("c", j, at),
		Occurrence: 1, ActionName: job.ActionNameMain, Attempt: attempt,
		StartTime: at.Add(time.Duration(attempt) * time.Minute), EndTime: at.Add(time.Duration(attempt)*time.Minute + time.Second),
		Status: status, Message: message, Final: status == job.ExecutionCompleted}
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
