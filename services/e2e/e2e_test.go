package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/azuritetest"
	"github.com/resched/resched/services/internal/sbfaketest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// Timeouts of the waits. Every wait ends as soon as what it waits for is there; these only
// bound a failure.
const (
	// deliveryTimeout bounds the wait for a delivery that is already due.
	deliveryTimeout = 20 * time.Second
	// lateness is how late after its expected time the target may receive an occurrence: the
	// planner and the worker add milliseconds, a loaded CI machine seconds.
	lateness = 15 * time.Second
	// pollTimeout bounds a schedctl poll for results the planner has yet to apply.
	pollTimeout = 15 * time.Second
	// leadTime puts the recurring job's first occurrence after the moment it is put.
	leadTime = 5 * time.Second
)

// Names the test uses.
const (
	collection   = "e2e"
	storageQueue = "e2e-jobs"
	sbQueue      = "orders"
	sbTopic      = "notifications"
	sbSub        = "all"
	demoJob      = "http-every-10-seconds" // an example job run.sh loads into collection demo
)

// TestEndToEnd runs the stack of `make run` and drives it as a user would: schedctl and a
// plain NATS publish in, deliveries to HTTP, Storage Queue and Service Bus out, history and
// status back through schedctl, and a clean stop.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("the end-to-end test starts the whole stack")
	}
	root := testenv.RepoRoot(t)
	bin := testenv.Build(t, commands...)
	az := azuritetest.Start(t)
	sb := sbfaketest.Start(t, sbfaketest.WithQueue(sbQueue), sbfaketest.WithTopic(sbTopic, sbSub))
	queue := az.Queue(t, storageQueue)

	s := startStack(t, root, bin, demoJob, emulators{storageEndpoint: az.Endpoint(), serviceBusEndpoint: sb.Endpoint()})
	nc, err := nats.Connect(s.natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect to the planner's NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	events, err := nc.SubscribeSync("scheduler.events." + collection + ".>")
	if err != nil {
		t.Fatalf("subscribe to events: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	s.mustSchedctl(t, "", "collection", "create", collection)
	// One-time jobs start when the planner accepts them: not before begin.
	begin := time.Now().UTC().Truncate(time.Second)
	first := time.Now().UTC().Add(leadTime).Truncate(time.Second)
	put(t, s, "http", httpRecurring(s.target, first))
	put(t, s, "failing", httpFailing(s.target))
	put(t, s, "storage", storageJob(az.SASToken(t, storageQueue, sasAdd, time.Now().Add(time.Hour))))
	put(t, s, "sbqueue", sbQueueJob(sb))
	put(t, s, "sbtopic", sbTopicJob(sb))
	if err := nc.Publish("scheduler.jobs."+collection+".viapub", mustJSON(t, httpOnce(s.target+"/e2e/viapub", "published"))); err != nil {
		t.Fatalf("publish a job: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	t.Run("script loaded its example job", func(t *testing.T) {
		d := s.out.waitDeliveries(t, deliveryTimeout, "demo", demoJob, 1)[0]
		if d.status != 200 || d.path != "/every-10-seconds" || d.tag == "" || d.request == "" {
			t.Errorf("delivery of demo/%s: %+v", demoJob, d)
		}
	})
	t.Run("recurring HTTP job", func(t *testing.T) { checkRecurring(t, s, first) })
	t.Run("job published on NATS", func(t *testing.T) {
		d := s.out.waitDeliveries(t, deliveryTimeout, collection, "viapub", 1)[0]
		if d.status != 200 || d.method != "POST" || d.path != "/e2e/viapub" || d.body != "published" ||
			d.tag == "" || d.request == "" || d.expectedTime.Before(begin) || d.at.Before(d.expectedTime) {
			t.Errorf("delivery of the published job: %+v", d)
		}
	})
	t.Run("retries then the error action", func(t *testing.T) { checkFailing(t, s, begin) })
	t.Run("a disable stops the retries", func(t *testing.T) { checkDisableStopsRetries(t, s) })
	t.Run("storage queue", func(t *testing.T) { checkStorageQueue(t, queue, begin) })
	t.Run("service bus queue", func(t *testing.T) {
		checkServiceBus(t, receiveQueue(t, sb, sbQueue), sbWant{job: "sbqueue", body: `{"kind":"settlement"}`,
			contentType: "application/json", subject: "settlement", custom: map[string]any{"appname": "FromScheduler"}}, begin)
	})
	t.Run("service bus topic", func(t *testing.T) {
		checkServiceBus(t, receiveSubscription(t, sb, sbTopic, sbSub), sbWant{job: "sbtopic", body: "weekly digest",
			correlationID: "digest"}, begin)
	})
	t.Run("Azure REST gateway", func(t *testing.T) { checkGateway(t, s) })
	t.Run("history", func(t *testing.T) { checkHistory(t, s) })
	t.Run("status", func(t *testing.T) { checkStatus(t, s) })
	t.Run("events", func(t *testing.T) {
		checkEvents(t, events, "viapub.accepted", "http.accepted", "http.completed", "failing.faulted")
	})
	t.Run("stop", func(t *testing.T) {
		s.stop(t)
		// Every line is read now: the recurring job ran exactly count times.
		lines, _, _ := s.out.snapshot()
		if got := deliveriesOf(lines, collection, "http"); len(got) != 3 {
			t.Errorf("the job with count 3 was delivered %d times", len(got))
		}
	})
}

// put sends a job definition through `schedctl job put C/J -f -`.
func put(t *testing.T, s *stack, name string, definition any) {
	t.Helper()
	// The definition may hold a key: only schedctl's answer, which never shows secrets, is
	// reported.
	s.mustSchedctl(t, string(mustJSON(t, definition)), "job", "put", collection+"/"+name, "-f", "-")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkRecurring: three GETs, at the job's start time and 2 and 4 seconds after, none early,
// each with the occurrence's identity.
func checkRecurring(t *testing.T, s *stack, first time.Time) {
	got := s.out.waitDeliveries(t, time.Until(first)+4*time.Second+deliveryTimeout, collection, "http", 3)
	tags, requests := map[string]bool{}, map[string]bool{}
	for i, d := range got {
		want := first.Add(time.Duration(2*i) * time.Second)
		if d.status != 200 || d.method != "GET" || d.path != "/e2e/http" {
			t.Errorf("delivery %d: %+v, want GET /e2e/http answered 200", i, d)
		}
		if d.expected != want.Format(time.RFC3339) {
			t.Errorf("delivery %d: expected execution time %q, want %s", i, d.expected, want.Format(time.RFC3339))
		}
		// The target prints whole seconds, truncated: a delivery at or after a whole second
		// prints that second or later.
		if d.at.Before(want) {
			t.Errorf("delivery %d arrived at %s, before its time %s", i, d.at.Format(time.RFC3339), want.Format(time.RFC3339))
		}
		if d.at.After(want.Add(lateness)) {
			t.Errorf("delivery %d arrived at %s, more than %s after its time %s", i, d.at.Format(time.RFC3339), lateness, want.Format(time.RFC3339))
		}
		if d.tag == "" || tags[d.tag] {
			t.Errorf("delivery %d: execution tag %q, want one of its own per occurrence", i, d.tag)
		}
		if d.request == "" || requests[d.request] {
			t.Errorf("delivery %d: client request id %q, want one of its own per attempt", i, d.request)
		}
		tags[d.tag], requests[d.request] = true, true
	}
}

// checkFailing: three attempts on /fail/ (the first and two retries) answered 500, one
// occurrence, then the error action.
func checkFailing(t *testing.T, s *stack, begin time.Time) {
	got := s.out.waitDeliveries(t, deliveryTimeout, collection, "failing", 4)
	attempts, errorAction := got[:3], got[3]
	requests := map[string]bool{}
	for i, d := range attempts {
		if d.status != 500 || d.method != "POST" || d.path != "/fail/e2e" || d.body != "fail" {
			t.Errorf("attempt %d: %+v, want POST /fail/e2e answered 500", i, d)
		}
		if d.tag == "" || d.tag != attempts[0].tag || d.expected != attempts[0].expected {
			t.Errorf("attempt %d: tag %q expected %q, want the first attempt's %q and %q", i, d.tag, d.expected, attempts[0].tag, attempts[0].expected)
		}
		if d.request == "" || requests[d.request] {
			t.Errorf("attempt %d: client request id %q, want one of its own", i, d.request)
		}
		requests[d.request] = true
	}
	if e := attempts[0].expectedTime; e.Before(begin) || attempts[0].at.Before(e) {
		t.Errorf("first attempt at %s expected at %s, want no earlier than %s", attempts[0].at, e, begin)
	}
	d := errorAction
	if d.status != 200 || d.method != "POST" || d.path != "/error-action" || d.body != "failed" ||
		d.tag != attempts[0].tag || d.expected != attempts[0].expected || d.request == "" || requests[d.request] {
		t.Errorf("error action: %+v, want POST /error-action with the occurrence's tag %q and a request id of its own", d, attempts[0].tag)
	}
	if len(got) > 4 {
		t.Errorf("%d deliveries of the failing job, want 3 attempts and the error action: %+v", len(got), got[4:])
	}
}

// checkDisableStopsRetries: a job disabled after its first attempt failed makes no retry (they
// waited on the due stream, and called the target after the disable); the same job left
// enabled makes both of its retries, the last 6 s after its first attempt.
func checkDisableStopsRetries(t *testing.T, s *stack) {
	put(t, s, "stopped", httpRetrying(s.target, "stopped"))
	put(t, s, "kept", httpRetrying(s.target, "kept"))
	s.out.waitDeliveries(t, deliveryTimeout, collection, "stopped", 1)
	s.mustSchedctl(t, "", "job", "disable", collection+"/stopped")
	s.out.waitDeliveries(t, deliveryTimeout, collection, "kept", 3)
	lines, _, _ := s.out.snapshot()
	if got := deliveriesOf(lines, collection, "stopped"); len(got) != 1 {
		t.Errorf("the job disabled after its first attempt was delivered %d times, want once", len(got))
	}
}

// checkHistory: the failing job's attempts, newest first: the error action completed after
// the three failed attempts of the main action, each retry at least the retry interval after
// the attempt before.
func checkHistory(t *testing.T, s *stack) {
	var h []job.HistoryEntry
	eventually(t, "the failing job's history to hold 4 attempts", func() (bool, string) {
		out, err := s.schedctl("", "job", "history", collection+"/failing", "-o", "json")
		if err != nil {
			return false, err.Error()
		}
		var reply struct {
			Value []job.HistoryEntry `json:"value"`
		}
		if err := json.Unmarshal([]byte(out), &reply); err != nil {
			return false, fmt.Sprintf("decode %q: %v", out, err)
		}
		h = reply.Value
		return len(h) >= 4, fmt.Sprintf("%d entries", len(h))
	})
	type attempt struct {
		action job.ActionName
		retry  int
		status job.ExecutionStatus
	}
	want := []attempt{
		{job.ActionNameError, 0, job.ExecutionCompleted},
		{job.ActionNameMain, 2, job.ExecutionFailed},
		{job.ActionNameMain, 1, job.ExecutionFailed},
		{job.ActionNameMain, 0, job.ExecutionFailed},
	}
	var got []attempt
	for _, e := range h {
		got = append(got, attempt{e.ActionName, e.RetryCount, e.Status})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history (newest first) = %+v, want %+v", got, want)
	}
	for i, e := range h {
		if e.RepeatCount != 1 || !e.ExpectedExecutionTime.Equal(h[0].ExpectedExecutionTime) || e.EndTime.Before(e.StartTime) || e.Message == "" {
			t.Errorf("history entry %d: %+v, want occurrence 1 with the others' expected time, a message and an end after its start", i, e)
		}
	}
	// Results carry milliseconds; a retry waits its 1 s after the attempt before ended.
	for i := 1; i < 3; i++ {
		if gap := h[i].StartTime.Sub(h[i+1].StartTime); gap < time.Second-time.Millisecond {
			t.Errorf("retry %d started %s after the attempt before it, want the retry interval of 1s", 3-i, gap)
		}
	}
}

// checkStatus: the recurring job completed after its 3 occurrences; the failing one faulted.
func checkStatus(t *testing.T, s *stack) {
	for _, tt := range []struct {
		job       string
		state     job.State
		execs     int
		faulted   int
		anyFailed bool
	}{
		{"http", job.StateCompleted, 3, 0, false},
		{"failing", job.StateFaulted, 1, 1, true},
	} {
		var d job.Definition
		eventually(t, collection+"/"+tt.job+" to be "+string(tt.state), func() (bool, string) {
			out, err := s.schedctl("", "job", "get", collection+"/"+tt.job, "-o", "json")
			if err != nil {
				return false, err.Error()
			}
			d = job.Definition{}
			if err := json.Unmarshal([]byte(out), &d); err != nil {
				return false, fmt.Sprintf("decode %q: %v", out, err)
			}
			return d.Properties.State == tt.state && d.Properties.Status != nil &&
				d.Properties.Status.ExecutionCount == tt.execs, fmt.Sprintf("state %s, status %+v", d.Properties.State, d.Properties.Status)
		})
		st := d.Properties.Status
		if st.FaultedCount != tt.faulted || (st.FailureCount > 0) != tt.anyFailed || st.LastExecutionTime == nil || st.NextExecutionTime != nil {
			t.Errorf("%s: status %+v, want faultedCount %d, failures: %v, a last and no next execution time",
				tt.job, st, tt.faulted, tt.anyFailed)
		}
	}
}

// checkEvents waits for the events, each named by "<job>.<kind>", on the collection's event
// subjects.
func checkEvents(t *testing.T, sub *nats.Subscription, want ...string) {
	prefix := "scheduler.events." + collection + "."
	seen := map[string]bool{}
	deadline := time.Now().Add(pollTimeout)
	for _, w := range want {
		for !seen[w] {
			msg, err := sub.NextMsg(time.Until(deadline))
			if err != nil {
				t.Fatalf("waiting for event %s%s: %v (seen %v)", prefix, w, err, seen)
			}
			seen[msg.Subject[len(prefix):]] = true
		}
	}
}

// eventually polls check until it reports done, failing the test after pollTimeout with the
// last state check described.
func eventually(t *testing.T, what string, check func() (done bool, state string)) {
	t.Helper()
	last := ""
	testenv.Eventually(t, pollTimeout, what, func() bool {
		done, state := check()
		last = state
		return done
	}, func() string { return "last: " + last })
}
