package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// startWatch runs `job history c/<j> --watch` against the planner, asking every 20 ms, until
// the returned stop; done receives what run returned.
func startWatch(t *testing.T, p *planner, j, output string, first int) (stdout, stderr *testenv.LogBuffer, stop func(), done chan error) {
	t.Helper()
	stdout, stderr = &testenv.LogBuffer{}, &testenv.LogBuffer{}
	inv := newInvocation("job history", "", strings.NewReader(""), stdout, stderr)
	if _, err := inv.parse([]string{"--server", p.url, "-o", output}, 0, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	w := &historyWatch{inv: inv, coll: "c", job: j, first: first, interval: 20 * time.Millisecond}
	go func() { done <- w.run(ctx); inv.close() }()
	t.Cleanup(cancel)
	return stdout, stderr, cancel, done
}

// --watch shows the latest attempts oldest first, then each attempt once as it is recorded;
// it ends at Ctrl-C (its context) with nil, and when the job is deleted with the planner's 404.
func TestHistoryWatch(t *testing.T) {
	p := startPlanner(t)
	p.mustRun(t, "", "collection", "create", "c")
	for _, j := range []string{"j", "gone"} {
		p.mustRun(t, "", "job", "create", "c/"+j, "--every", "1h", "--at", "2099-01-01T00:00:00Z", "--http-get", "http://x/")
	}
	at := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	publishResults(t, p, resultOf("j", at, 0, job.ExecutionFailed, "attempt one"),
		resultOf("j", at, 1, job.ExecutionFailed, "attempt two"))
	testenv.Eventually(t, 10*time.Second, "two attempts in the history", func() bool {
		return strings.Count(p.mustRun(t, "", "job", "history", "c/j"), "attempt ") == 2
	})

	out, errOut, stop, done := startWatch(t, p, "j", "table", 1) // the latest one first
	testenv.Eventually(t, 10*time.Second, "the latest attempt", func() bool { return strings.Contains(out.String(), "attempt two") })
	publishResults(t, p, resultOf("j", at, 2, job.ExecutionFailed, "attempt three"))
	publishResults(t, p, resultOf("j", at, 3, job.ExecutionCompleted, "attempt four"))
	testenv.Eventually(t, 10*time.Second, "the attempts recorded while watching", func() bool { return strings.Contains(out.String(), "attempt four") })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the watch ended with %v, want nil at its stop", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "EXPECTED  ") || !strings.Contains(lines[1], "attempt two") ||
		!strings.Contains(lines[2], "attempt three") || !strings.Contains(lines[3], "attempt four") || errOut.String() != "" {
		t.Fatalf("the watch printed\n%s\n(stderr %q); want the header, then attempts two, three and four once each", out, errOut)
	}
	// The columns stay where the header put them.
	for _, l := range lines[1:] {
		if strings.Index(l, "MainAction") != strings.Index(lines[0], "ACTION") || strings.Index(l, "attempt") != strings.Index(lines[0], "MESSAGE") {
			t.Errorf("a row out of the header's columns:\n%s\n%s", lines[0], l)
		}
	}

	// One JSON object a line; the job deleted ends the watch with the planner's answer.
	publishResults(t, p, resultOf("gone", at, 0, job.ExecutionCompleted, "only"))
	testenv.Eventually(t, 10*time.Second, "the attempt in the history", func() bool {
		return strings.Contains(p.mustRun(t, "", "job", "history", "c/gone"), "only")
	})
	out, _, _, done = startWatch(t, p, "gone", "json", 10)
	testenv.Eventually(t, 10*time.Second, "the attempt", func() bool { return strings.Contains(out.String(), `"message":"only"`) })
	p.mustRun(t, "", "job", "delete", "c/gone", "--yes")
	var answered *apiError
	if err := <-done; !errors.As(err, &answered) || answered.Status != 404 {
		t.Fatalf("the watch of a deleted job ended with %v, want the planner's 404", err)
	}
	if got := out.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, `{"startTime":`) {
		t.Fatalf("the JSON watch printed %q, want one object on one line", got)
	}

	// A planner that stops answering is said once, and the watch goes on when one answers.
	out, errOut, stop, done = startWatch(t, p, "j", "table", 1)
	testenv.Eventually(t, 10*time.Second, "the latest attempt", func() bool { return strings.Contains(out.String(), "attempt four") })
	p.proc.Kill(t)
	testenv.Eventually(t, 10*time.Second, "the watch to say no planner answers", func() bool { return strings.Contains(errOut.String(), "still watching") })
	p.proc.Restart(t)
	publishResults(t, p, resultOf("j", at, 4, job.ExecutionCompleted, "attempt five"))
	testenv.Eventually(t, 30*time.Second, "the attempt recorded after the planner came back", func() bool {
		return strings.Contains(out.String(), "attempt five")
	})
	stop()
	if err := <-done; err != nil || strings.Count(errOut.String(), "still watching") != 1 {
		t.Fatalf("the watch through a planner's absence ended with %v and said:\n%s\nwant nil, and its absence said once", err, errOut)
	}

	code, _, errText := p.schedctl(t, "", "job", "history", "c/j", "--watch", "--all")
	if code != 2 || !strings.Contains(errText, "--all, --skip and --after do not go with it") {
		t.Fatalf("--watch --all: exit %d, %q", code, errText)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--watch", "--interval", "50ms"}, "--interval 50ms: must be at least 100ms"},
		{[]string{"--interval", "2s"}, "--interval goes with --watch"},
		{[]string{"--watch", "--interval", "soon"}, `invalid value "soon" for flag -interval`},
	} {
		code, _, errText := p.schedctl(t, "", append([]string{"job", "history", "c/j"}, c.args...)...)
		if code != 2 || !strings.Contains(errText, c.says) {
			t.Errorf("job history %v: exit %d, %q; want 2 and %q", c.args, code, errText, c.says)
		}
	}
}
