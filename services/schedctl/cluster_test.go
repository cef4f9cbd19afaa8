package main

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
)

// schedctl cluster status against a real planner: the planner and the partitions it holds, no
// outage, and the three streams with the planners' consumers.
func TestClusterStatus(t *testing.T) {
	p := startPlanner(t)
	p.mustRun(t, "", "collection", "create", "one")
	p.mustRun(t, "", "collection", "create", "two")
	var st bus.Status
	testenv.Eventually(t, 20*time.Second, "the planner to hold every partition", func() bool {
		decode(t, p.mustRun(t, "", "cluster", "status", "-o", "json"), &st)
		return len(st.Planners) == 1 && len(st.Planners[0].Partitions) == st.Partitions && len(st.Unowned) == 0
	})
	if st.Partitions != 16 || st.Planners[0].ID != st.AnsweredBy || len(st.Outages) != 0 || st.DueNow != 0 || len(st.Problems) != 0 ||
		st.Collections == nil || *st.Collections != 2 {
		t.Errorf("status %+v", st)
	}
	var streams []string
	for _, s := range st.Streams {
		for _, c := range s.Consumers {
			streams = append(streams, s.Name+"/"+c.Name)
		}
		if len(s.Consumers) == 0 {
			streams = append(streams, s.Name)
		}
	}
	if want := []string{"SCHEDULER_JOBS/planner-intake", "SCHEDULER_DUE", "SCHEDULER_RESULTS/planner-results"}; !slices.Equal(streams, want) {
		t.Errorf("streams and consumers %v, want %v", streams, want)
	}
	out := p.mustRun(t, "", "cluster", "status")
	wantLines(t, out, "Planners:  +1 live", "Partitions:  +16; held by no planner: -", "Outages on record:  +none",
		"Collections:  +2", "Due, not published:  +0", "Stream SCHEDULER_DUE:  +0 messages, 0 bytes")
	for _, part := range []string{st.AnsweredBy + ":", "partitions 0-15; heartbeat until ", "consumer planner-results:", "0 pending, 0 in flight"} {
		if !strings.Contains(out, part) {
			t.Errorf("no %q in:\n%s", part, out)
		}
	}
	if strings.Contains(out, "Not read") {
		t.Errorf("the status could not read everything:\n%s", out)
	}
	// The test's Redis keeps no append-only file, and its planner has no secret keys: the
	// status says both, as the planner's start does, and nothing else.
	if len(st.Warnings) != 2 || !strings.Contains(st.Warnings[0], "Redis keeps no append-only file") ||
		!strings.HasPrefix(st.Warnings[1], "planner "+st.AnsweredBy+": no secret keys") {
		t.Errorf("warnings %q, want the Redis without an append-only file and the planner without secret keys named", st.Warnings)
	}
	wantLines(t, out, "Warning:  +Redis keeps no append-only file: a crash or restart loses what was written since its last snapshot, "+
		"every job without one: set appendonly yes (docs/operations.md); servers: redis")
}

// With Redis not answering (its process stopped, as a host that is gone: connections hang
// rather than being refused), cluster status still answers within schedctl's wait: the
// streams, and what could not be read. Unbounded, the planner's reads of Redis waited out the
// client's time-outs and retries, and schedctl, waiting 5 s, said no planner answered.
func TestClusterStatusWithRedisNotAnswering(t *testing.T) {
	p := startPlanner(t)
	if err := syscall.Kill(p.redis.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(p.redis.PID(), syscall.SIGCONT) })
	out := p.mustRun(t, "", "cluster", "status")
	for _, part := range []string{"Not read:", "live planners", "Stream SCHEDULER_DUE:", "consumer planner-results:"} {
		if !strings.Contains(out, part) {
			t.Errorf("no %q in:\n%s", part, out)
		}
	}
}

func TestSpans(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{nil, ""}, {[]int{3}, "3"}, {[]int{0, 1, 2, 3}, "0-3"}, {[]int{0, 1, 3, 5, 6}, "0-1, 3, 5-6"}} {
		if got := spans(c.in); got != c.want {
			t.Errorf("spans(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A planner not live that still holds leases (standing down, or stopped and its leases not run
// out) is named with its partitions, which are then neither a live planner's nor unowned.
func TestStatusNamesThePlannersLeaving(t *testing.T) {
	var b strings.Builder
	writeStatus(&b, bus.Status{Partitions: 16, Unowned: []int{}, Leaving: []bus.LeaseHolder{{ID: "p-2", Partitions: []int{3, 4, 5, 9}}}})
	for _, line := range []string{"Leaving:\tp-2, not live, holds partitions 3-5, 9 until its leases run out\n", "Partitions:\t16; held by no planner: -\n"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("no line %q in:\n%s", line, b.String())
		}
	}
}

// Several outages are listed one a line under their heading, the further ones without a key.
func TestStatusListsEveryOutage(t *testing.T) {
	var b strings.Builder
	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	writeStatus(&b, bus.Status{Partitions: 16, Outages: []bus.OutageStatus{{From: at, To: at.Add(time.Minute)}, {From: at.Add(-time.Hour), To: at.Add(-50 * time.Minute)}}})
	for _, line := range []string{"\nOutages on record:\tno planner ran from 2026-11-29T07:00:00Z to 2026-11-29T07:01:00Z (1m0s)\n",
		"\n\tno planner ran from 2026-11-29T06:00:00Z to 2026-11-29T06:10:00Z (10m0s)\n"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("no line %q in:\n%s", line, b.String())
		}
	}
}

// The collections' changes under way are listed one a line, with how long ago their last step
// was by the answering planner's clock; one past bus.StaleChangeAfter is said to wait for
// another planner. The deleted jobs whose messages are still to remove are counted alike.
func TestStatusListsTheCollectionsChanges(t *testing.T) {
	var b strings.Builder
	at := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	writeStatus(&b, bus.Status{Partitions: 16, Time: at, Changes: []bus.ChangeStatus{
		{Collection: "old", Change: "delete", LastStep: at.Add(-25 * time.Second)},
		{Collection: "big", Change: "Enabled", LastStep: at.Add(-1200 * time.Millisecond)},
		{Collection: "left", LastStep: at}},
		Purges: &bus.PurgeStatus{Jobs: 3, Oldest: at.Add(-25 * time.Second)}})
	for _, line := range []string{
		"\nJob purges:\t3 jobs deleted or disabled with messages still to remove from the due stream, the oldest 25s ago (its planner stopped or NATS did not answer: another planner removes them)\n",
		"\nCollection changes:\told being deleted, last step 25s ago (its planner stopped: another planner finishes it)\n",
		"\n\tbig being set Enabled, last step 1s ago\n", "\n\tleft being changed, last step 0s ago\n"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("no line %q in:\n%s", line, b.String())
		}
	}
}
