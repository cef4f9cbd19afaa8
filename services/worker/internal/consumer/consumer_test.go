package consumer_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/worker/internal/consumer"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/shared/job"
)

// summary is what the tests check of a result.
type summary struct {
	name    job.ActionName
	attempt int
	status  job.ExecutionStatus
	final   bool
	faulted bool
}

func summarise(rs []bus.Result) []summary {
	out := make([]summary, len(rs))
	for i, r := range rs {
		out[i] = summary{r.ActionName, r.Attempt, r.Status, r.Final, r.Faulted}
	}
	return out
}

func checkResults(t *testing.T, got []bus.Result, tag string, want []summary) {
	t.Helper()
	for _, r := range got {
		if r.ExecutionTag != tag || r.Collection != "c" || r.Occurrence != 1 || r.Message == "" || r.EndTime.Before(r.StartTime) {
			t.Errorf("result does not describe the attempt of occurrence %s: %+v", tag, r)
		}
	}
	s := summarise(got)
	if len(s) != len(want) {
		t.Fatalf("results %+v, want %+v", s, want)
	}
	for i := range want {
		if s[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, s[i], want[i])
		}
	}
}

func TestRetryThenSuccess(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t, http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusOK)
	e.worker(t, nil)
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, fixed(3, 10*time.Millisecond))})

	checkResults(t, res.take(t, 3), tag, []summary{
		{job.ActionNameMain, 0, job.ExecutionFailed, false, false},
		{job.ActionNameMain, 1, job.ExecutionFailed, false, false},
		{job.ActionNameMain, 2, job.ExecutionCompleted, true, false},
	})
	calls := tg.callsSoFar()
	if len(calls) != 3 {
		t.Fatalf("target got %d calls, want 3", len(calls))
	}
	ids := map[string]bool{}
	for _, c := range calls {
		if c.tag != tag {
			t.Errorf("call with execution tag %q, want %q on every retry", c.tag, tag)
		}
		ids[c.requestID] = true
	}
	if len(ids) != 3 {
		t.Errorf("request ids %v: want a new one per attempt", ids)
	}
	testenv.Eventually(t, deadline, "the due message to be acknowledged", func() bool { return e.dueMessages(t) == 0 })
}

func TestRetriesExhaustedThenErrorAction(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	main := newTarget(t, http.StatusInternalServerError)
	fallback := newTarget(t, http.StatusBadGateway, http.StatusOK)
	e.worker(t, nil)
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{
		ActionSpec:  httpAct(main.URL, fixed(1, 10*time.Millisecond)),
		ErrorAction: &job.ErrorAction{ActionSpec: httpAct(fallback.URL, fixed(2, 10*time.Millisecond))},
	})

	checkResults(t, res.take(t, 4), tag, []summary{
		{job.ActionNameMain, 0, job.ExecutionFailed, false, false},
		{job.ActionNameMain, 1, job.ExecutionFailed, false, false},
		{job.ActionNameError, 0, job.ExecutionFailed, false, false},
		{job.ActionNameError, 1, job.ExecutionCompleted, true, true},
	})
	if n, m := len(main.callsSoFar()), len(fallback.callsSoFar()); n != 2 || m != 2 {
		t.Errorf("main target got %d calls, error target %d; want 2 and 2", n, m)
	}
	testenv.Eventually(t, deadline, "both due messages to be acknowledged", func() bool { return e.dueMessages(t) == 0 })
}

// A job deleted while its attempt runs has no error action after it: the planners remove what
// the due stream holds for the job, the message the worker holds too, and the worker used to
// publish the error action (a new message) all the same (seen with make run: the error
// action's target called 13 s after the delete).
func TestErrorActionOfAJobDeletedWhileItRanIsNotRun(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	var logs testenv.LogBuffer
	main := newTarget(t, http.StatusInternalServerError)
	main.block, main.arrived = make(chan struct{}), make(chan struct{}, 1)
	fallback := newTarget(t)
	e.loggedWorker(t, &logs, nil)
	none := &job.RetryPolicy{RetryType: job.RetryNone}
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{
		ActionSpec:  httpAct(main.URL, none),
		ErrorAction: &job.ErrorAction{ActionSpec: httpAct(fallback.URL, none)},
	})
	<-main.arrived
	// As the planners do at a delete (planner.duePurger).
	ctx := context.Background()
	st, err := e.js.Stream(ctx, e.subjects.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, e.subjects.Due("c", "j"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, m.Sequence); err != nil {
		t.Fatal(err)
	}
	close(main.block)

	checkResults(t, res.take(t, 1), tag, []summary{{job.ActionNameMain, 0, job.ExecutionFailed, false, false}})
	testenv.Eventually(t, deadline, "the worker to say the error action is not run", func() bool {
		return strings.Contains(logs.String(), "the job was deleted while its attempt ran: its error action is not run")
	}, logs.String)
	if n := e.dueMessages(t); n != 0 {
		t.Errorf("the due stream holds %d messages after the delete, want none", n)
	}
	if n := len(fallback.callsSoFar()); n != 0 {
		t.Errorf("the error action of the deleted job ran %d times", n)
	}
}

// When the stream does not answer whether the message is still there, the error action runs:
// only a message known to be gone spares it (at least once wins over a doubt).
func TestErrorActionRunsWhenTheStreamDoesNotSayTheJobIsGone(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	main := newTarget(t, http.StatusInternalServerError)
	fallback := newTarget(t)
	e.worker(t, func(c *consumer.Config) { c.JS = unansweredGets{c.JS} })
	none := &job.RetryPolicy{RetryType: job.RetryNone}
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{
		ActionSpec:  httpAct(main.URL, none),
		ErrorAction: &job.ErrorAction{ActionSpec: httpAct(fallback.URL, none)},
	})
	checkResults(t, res.take(t, 2), tag, []summary{
		{job.ActionNameMain, 0, job.ExecutionFailed, false, false},
		{job.ActionNameError, 0, job.ExecutionCompleted, true, true},
	})
	if n := len(fallback.callsSoFar()); n != 1 {
		t.Errorf("the error action ran %d times, want once", n)
	}
}

// A run-now in the millisecond of a scheduled occurrence is another occurrence: when both
// fail, both error actions run. Their messages' ids once came from the job and the time
// alone, so JetStream dropped the second error action as a re-publish of the first.
func TestErrorActionsOfARunNowAndAnOccurrenceOfItsMillisecondBothRun(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	main := newTarget(t, http.StatusInternalServerError)
	fallback := newTarget(t)
	e.worker(t, nil)
	none := &job.RetryPolicy{RetryType: job.RetryNone}
	act := job.Action{ActionSpec: httpAct(main.URL, none), ErrorAction: &job.ErrorAction{ActionSpec: httpAct(fallback.URL, none)}}
	tags := map[string]bool{
		e.publishDue(t, "c", "j", scheduled, act):                                                  true,
		e.publishDueAs(t, "c", "j", scheduled, 0, bus.RunNowID("c", "j", 0, scheduled, "n1"), act): true,
	}
	ends := map[string]int{}
	for _, r := range res.take(t, 4) {
		if r.ActionName == job.ActionNameError && r.Final && tags[r.ExecutionTag] {
			ends[r.ExecutionTag]++
		}
	}
	if len(ends) != 2 || len(fallback.callsSoFar()) != 2 {
		t.Fatalf("error actions ended for %v, the error target called %d times; want each of %v once", ends, len(fallback.callsSoFar()), tags)
	}
	testenv.Eventually(t, deadline, "every due message to be acknowledged", func() bool { return e.dueMessages(t) == 0 })
}

// An occurrence published without a message id (by a client other than a planner) still has
// its error action: the error message's id is then made from the occurrence.
func TestErrorActionOfAnOccurrenceWithoutAnIDRuns(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	main := newTarget(t, http.StatusInternalServerError)
	fallback := newTarget(t)
	e.worker(t, nil)
	none := &job.RetryPolicy{RetryType: job.RetryNone}
	tag := e.publishDueAs(t, "c", "j", scheduled, 1, "", job.Action{ActionSpec: httpAct(main.URL, none),
		ErrorAction: &job.ErrorAction{ActionSpec: httpAct(fallback.URL, none)}})
	checkResults(t, res.take(t, 2), tag, []summary{
		{job.ActionNameMain, 0, job.ExecutionFailed, false, false},
		{job.ActionNameError, 0, job.ExecutionCompleted, true, true},
	})
	if n := len(fallback.callsSoFar()); n != 1 {
		t.Errorf("the error action ran %d times, want once", n)
	}
}

func TestMalformedMessagesAreTerminated(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t)
	e.worker(t, nil)
	ctx := context.Background()
	if _, err := e.js.Publish(ctx, e.subjects.Due("c", "garbage"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	wrongSubject := bus.AppendDue(nil, "other", "j", 0, scheduled, 1, []byte(`{"type":"Http"}`))
	if _, err := e.js.Publish(ctx, e.subjects.Due("c", "j"), wrongSubject); err != nil {
		t.Fatal(err)
	}
	unknownPhase := nats.NewMsg(e.subjects.Due("c", "p"))
	unknownPhase.Data = bus.AppendDue(nil, "c", "p", 0, scheduled, 1, []byte(`{"type":"Http"}`))
	unknownPhase.Header.Set(consumer.HeaderPhase, "sideways")
	if _, err := e.js.PublishMsg(ctx, unknownPhase); err != nil {
		t.Fatal(err)
	}
	tag := e.publishDue(t, "c", "ok", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})

	got := res.take(t, 1)
	if got[0].ExecutionTag != tag || got[0].Status != job.ExecutionCompleted {
		t.Errorf("first result %+v, want the valid occurrence's", got[0])
	}
	testenv.Eventually(t, deadline, "the malformed messages to be terminated", func() bool { return e.dueMessages(t) == 0 })
}

func TestThreeWorkersDeliverEachOccurrenceOnce(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t)
	for range 3 {
		e.worker(t, nil)
	}
	const jobs, occurrences = 15, 3
	tags := map[string]bool{}
	for j := range jobs {
		for o := range occurrences {
			name := "job-" + string(rune('a'+j))
			tags[e.publishDue(t, "c", name, scheduled.Add(time.Duration(o)*time.Minute), job.Action{ActionSpec: httpAct(tg.URL, nil)})] = true
		}
	}
	for _, r := range res.take(t, jobs*occurrences) {
		if r.Status != job.ExecutionCompleted || !r.Final || r.Attempt != 0 {
			t.Errorf("result %+v, want a completed first attempt", r)
		}
	}
	seen := map[string]int{}
	for _, c := range tg.callsSoFar() {
		seen[c.tag]++
	}
	for tag := range tags {
		if seen[tag] != 1 {
			t.Errorf("occurrence %s delivered %d times, want once", tag, seen[tag])
		}
	}
	if len(seen) != len(tags) {
		t.Errorf("target saw %d occurrences, want %d", len(seen), len(tags))
	}
}

// A busy worker reports every result of attempts that end together exactly once, whether
// they go alone or gathered (how many gather depends on the machine's speed: reporter_test.go
// checks the gathering with acknowledgements held in hand).
func TestBusyWorkerBatchesItsResults(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t)
	const n = 40
	tg.block, tg.arrived = make(chan struct{}), make(chan struct{}, n)
	e.worker(t, func(c *consumer.Config) { c.Concurrency = n })
	tags := map[string]bool{}
	for i := range n {
		tags[e.publishDue(t, []string{"c", "d"}[i%2], fmt.Sprint("j", i), scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})] = true
	}
	for range n {
		<-tg.arrived // every delivery is in flight
	}
	close(tg.block) // and they all end at once
	eachOnce(t, res.take(t, n), tags)
	t.Logf("%d results came in %d messages", n, res.messages)
	testenv.Eventually(t, deadline, "every due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
}

// Results that end together go in one message; when the results stream refuses it for its size
// (an operator set the stream's largest message below the worker's 256 KiB), they are stored
// one to a message and later messages are kept smaller. Sent again whole, the message was
// refused every time and each of its deliveries ran again, forever.
func TestResultsTooLargeTogetherAreStoredApart(t *testing.T) {
	e := newEnv(t)
	natstest.SetMaxMsgSize(t, e.js, e.subjects.ResultsStream(), 2048) // a few results, not 40
	res := e.results(t)
	tg := newTarget(t)
	const n = 40
	tg.block, tg.arrived = make(chan struct{}), make(chan struct{}, 2*n)
	e.worker(t, func(c *consumer.Config) { c.Concurrency, c.ResultLinger = n, 50*time.Millisecond })
	tags := map[string]bool{}
	for i := range n {
		tags[e.publishDue(t, "c", fmt.Sprint("j", i), scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})] = true
	}
	for range n {
		<-tg.arrived
	}
	close(tg.block) // they end together, and their results gather
	eachOnce(t, res.take(t, n), tags)
	testenv.Eventually(t, deadline, "every due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
	if calls := len(tg.callsSoFar()); calls != n {
		t.Fatalf("the target was called %d times for %d occurrences", calls, n)
	}
	t.Logf("%d results came in %d messages", n, res.messages)
}

// A target whose answer is larger than a result may be is called once, and its result stored
// with its message cut, and so marked Completed; sent whole, the result was refused at every
// attempt, and the attempt ran again forever.
//   - 1.5 MiB of response headers (net/http reads up to 10 MiB), over NATS's 1 MiB max_payload:
//     the worker's cut to 8 KiB;
//   - 6 KiB of headers under a results stream that takes 4 KiB (an operator's limit): the
//     further cut of a result refused alone, which says so.
func TestLargeAnswerIsCalledOnceAndRecordedCut(t *testing.T) {
	for _, c := range []struct {
		name        string
		header      int   // bytes of the answer's header
		streamLimit int32 // the results stream's largest message; 0: none
		check       func(message string) bool
	}{
		{"over max_payload", 1536 << 10, 0, func(m string) bool {
			return len(m) <= executor.MaxResultMessage && strings.Contains(m, "X-Large: aaa")
		}},
		{"over the stream's limit", 6 << 10, 4096, func(m string) bool { return strings.HasSuffix(m, "takes no larger result)") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if c.streamLimit > 0 {
				natstest.SetMaxMsgSize(t, e.js, e.subjects.ResultsStream(), c.streamLimit)
			}
			res := e.results(t)
			tg := newTarget(t)
			tg.answer = http.Header{"X-Large": {strings.Repeat("a", c.header)}}
			e.worker(t, nil)
			tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
			got := res.take(t, 1)[0]
			if got.ExecutionTag != tag || got.Status != job.ExecutionCompleted || !c.check(got.Message) {
				t.Fatalf("result %s %s with a message of %d bytes ending %q", got.ExecutionTag, got.Status, len(got.Message),
					got.Message[max(len(got.Message)-40, 0):])
			}
			testenv.Eventually(t, deadline, "the due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
			if calls := len(tg.callsSoFar()); calls != 1 {
				t.Fatalf("the target was called %d times", calls)
			}
		})
	}
}

// A result the results stream refuses for its size even cut to its shortest (an operator's
// limit under the result's own fields) can never be stored as it is, and publishing it again
// would be refused forever: the attempt runs again after RetryDelay, doubling, until the stream
// takes the result of one. Its due message is acknowledged only then.
func TestResultTooLargeEvenCutRunsTheAttemptAgain(t *testing.T) {
	e := newEnv(t)
	natstest.SetMaxMsgSize(t, e.js, e.subjects.ResultsStream(), 128) // under any result
	var logs testenv.LogBuffer
	tg := newTarget(t)
	e.loggedWorker(t, &logs, nil)
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	waits := loggedWaits(t, &logs, "result not published; the attempt will run again", 2)
	if want := []string{"50ms", "100ms"}; !slices.Equal(waits, want) {
		t.Errorf("waits before the attempt ran again %v, want %v", waits, want)
	}
	if n := e.dueMessages(t); n != 1 {
		t.Fatalf("due stream holds %d messages while no result is stored, want 1", n)
	}
	natstest.SetMaxMsgSize(t, e.js, e.subjects.ResultsStream(), -1)
	got := e.results(t).take(t, 1)[0]
	if got.ExecutionTag != tag || got.Status != job.ExecutionCompleted || got.Attempt < 2 {
		t.Fatalf("result %s %s of attempt %d, want a later attempt Completed", got.ExecutionTag, got.Status, got.Attempt)
	}
	testenv.Eventually(t, deadline, "the due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
	if calls := len(tg.callsSoFar()); calls != got.Attempt+1 {
		t.Errorf("the target was called %d times for a result of attempt %d", calls, got.Attempt)
	}
}

// A delivery's slot is free once its attempt has ended: the next due message is delivered while
// the last one's result still waits for the stream's acknowledgement, and no due message is
// acknowledged before its result's acknowledgement.
func TestSlotIsFreeWhileTheResultAwaitsItsAcknowledgement(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t)
	gate := make(chan struct{})
	e.worker(t, func(c *consumer.Config) {
		c.Concurrency = 1
		c.JS = heldPubAcks{JetStream: c.JS, gate: gate}
	})
	for _, j := range []string{"j1", "j2"} {
		e.publishDue(t, "c", j, scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	}
	testenv.Eventually(t, deadline, "both occurrences delivered by the one slot", func() bool { return len(tg.callsSoFar()) == 2 })
	if n := e.dueMessages(t); n != 2 {
		t.Fatalf("due stream holds %d messages while their results await acknowledgement, want 2", n)
	}
	close(gate)
	if got := len(res.take(t, 2)); got != 2 {
		t.Fatalf("%d results, want 2", got)
	}
	testenv.Eventually(t, deadline, "every due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
}

// A result the results stream does not take (here: the stream is gone) is not lost: the due
// message is not acknowledged, the result is published again, and once the stream is back it
// is stored and the occurrence settled. The attempt does not run again: the target had its
// call (it was called again for each refusal before).
func TestResultNotPublishedIsPublishedAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tg, tag, _ := e.resultRefused(t, 2, nil)
	if n := e.dueMessages(t); n != 1 {
		t.Fatalf("due stream holds %d messages while no result could be stored, want 1", n)
	}
	if _, err := bus.EnsureStreams(ctx, e.js, e.subjects, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	res := e.results(t)
	checkResults(t, res.take(t, 1), tag, []summary{{job.ActionNameMain, 0, job.ExecutionCompleted, true, false}})
	testenv.Eventually(t, deadline, "the due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
	if n := len(tg.callsSoFar()); n != 1 {
		t.Errorf("target got %d calls, want 1", n)
	}
}

func TestStopFinishesTheDeliveriesInFlight(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t)
	tg.block, tg.arrived = make(chan struct{}), make(chan struct{}, 1)
	stop := e.worker(t, nil)
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	<-tg.arrived

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) with a delivery in flight", err)
	default:
	}
	close(tg.block)
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkResults(t, res.take(t, 1), tag, []summary{{job.ActionNameMain, 0, job.ExecutionCompleted, true, false}})
	if n := e.dueMessages(t); n != 0 {
		t.Errorf("due stream holds %d messages after a clean stop, want 0", n)
	}
}

func TestStopTimeoutHandsTheDeliveryBack(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t)
	tg.block, tg.arrived = make(chan struct{}), make(chan struct{}, 1)
	stop := e.worker(t, func(c *consumer.Config) { c.StopTimeout = 50 * time.Millisecond })
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	<-tg.arrived
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// The target answers from now on; a second worker gets the occurrence back at once (the
	// AckWait of 30 s would outlast the test's deadline).
	tg.mu.Lock()
	tg.block, tg.arrived = nil, nil
	tg.mu.Unlock()
	e.worker(t, nil)
	checkResults(t, res.take(t, 1), tag, []summary{{job.ActionNameMain, 1, job.ExecutionCompleted, true, false}})
}

// A worker that stops while it holds a result the results stream has not taken hands the due
// message back once its StopTimeout has passed, and another worker runs the attempt again (its
// outcome was never stored): the message is not left to its AckWait.
func TestStopHandsBackAMessageWhoseResultIsNotStored(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tg, tag, stop := e.resultRefused(t, 1, func(c *consumer.Config) { c.StopTimeout = 200 * time.Millisecond })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := bus.EnsureStreams(ctx, e.js, e.subjects, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	res := e.results(t)
	e.worker(t, nil)
	checkResults(t, res.take(t, 1), tag, []summary{{job.ActionNameMain, 1, job.ExecutionCompleted, true, false}})
	if n := len(tg.callsSoFar()); n != 2 {
		t.Errorf("target got %d calls, want 2 (the second worker ran the attempt again)", n)
	}
}

func TestLongDeliveryIsKeptInProgress(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	// Watch the acknowledgements the worker sends: "+WPI" is "work in progress".
	acks, err := e.srv.Connect(t).SubscribeSync("$JS.ACK.>")
	if err != nil {
		t.Fatal(err)
	}
	tg := newTarget(t)
	tg.block, tg.arrived = make(chan struct{}), make(chan struct{}, 4)
	e.worker(t, func(c *consumer.Config) { c.AckWait = time.Second })
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	<-tg.arrived

	// Three heartbeats span more than the AckWait: without them the server would have handed
	// the occurrence out again.
	for n := 0; n < 3; {
		m, err := acks.NextMsg(deadline)
		if err != nil {
			t.Fatalf("waiting for in-progress acknowledgements: %v", err)
		}
		if bytes.Equal(m.Data, []byte("+WPI")) {
			n++
		}
	}
	close(tg.block)
	checkResults(t, res.take(t, 1), tag, []summary{{job.ActionNameMain, 0, job.ExecutionCompleted, true, false}})
	if n := len(tg.callsSoFar()); n != 1 {
		t.Errorf("target got %d calls, want 1", n)
	}
}

// A result that waits long for the results stream (its acknowledgement held here, as in a
// stream leader election) keeps its due message in progress: the occurrence is not handed to
// another delivery meanwhile.
func TestMessageAwaitingItsResultIsKeptInProgress(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	acks, err := e.srv.Connect(t).SubscribeSync("$JS.ACK.>")
	if err != nil {
		t.Fatal(err)
	}
	tg := newTarget(t)
	gate := make(chan struct{})
	e.worker(t, func(c *consumer.Config) {
		c.AckWait = time.Second
		c.JS = heldPubAcks{JetStream: c.JS, gate: gate}
	})
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	testenv.Eventually(t, deadline, "the occurrence delivered", func() bool { return len(tg.callsSoFar()) == 1 })
	for n := 0; n < 3; {
		m, err := acks.NextMsg(deadline)
		if err != nil {
			t.Fatalf("waiting for in-progress acknowledgements: %v", err)
		}
		if bytes.Equal(m.Data, []byte("+WPI")) {
			n++
		}
	}
	close(gate)
	checkResults(t, res.take(t, 1), tag, []summary{{job.ActionNameMain, 0, job.ExecutionCompleted, true, false}})
	testenv.Eventually(t, deadline, "the due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
	if n := len(tg.callsSoFar()); n != 1 {
		t.Errorf("target got %d calls, want 1", n)
	}
}

// A results stream that refuses every result (JetStream's storage full; here a limit of one
// message, reached) has the result published again, each time after twice the wait before,
// so the stream is not asked every RetryDelay for as long as it lasts. Once the stream takes
// results, the attempt's result is stored, numbered as the first attempt: the target was
// called once, and the refusals neither called it again nor used up its retries.
func TestRefusedResultIsPublishedAgainLessAndLessOften(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st := e.refuseMore(t, e.subjects.ResultsStream())
	if _, err := e.js.Publish(ctx, e.subjects.Result("c", "filler"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	tg := newTarget(t, http.StatusOK)
	e.loggedWorker(t, &logs, nil)
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	waits := loggedWaits(t, &logs, "result not published", 4)
	if want := []string{"50ms", "100ms", "200ms", "400ms"}; !slices.Equal(waits, want) {
		t.Errorf("waits before the result was published again %v, want %v", waits, want)
	}
	if err := st.Purge(ctx); err != nil { // the stream takes results again
		t.Fatal(err)
	}
	checkResults(t, e.results(t).take(t, 1), tag, []summary{{job.ActionNameMain, 0, job.ExecutionCompleted, true, false}})
	testenv.Eventually(t, deadline, "the due message acknowledged", func() bool { return e.dueMessages(t) == 0 })
	if n := len(tg.callsSoFar()); n != 1 {
		t.Errorf("target got %d calls, want 1", n)
	}
}

// An error action the due stream refuses (its storage full) is not lost: it is published
// again, less and less often, and once the stream takes messages again it is scheduled and
// runs. The failed attempt does not run again (it did for each refusal before).
func TestRefusedErrorActionIsScheduledAgainLessAndLessOften(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	st := e.refuseMore(t, e.subjects.DueStream()) // the occurrence itself fills it
	var logs testenv.LogBuffer
	main := newTarget(t, http.StatusInternalServerError)
	fallback := newTarget(t)
	e.loggedWorker(t, &logs, nil)
	none := &job.RetryPolicy{RetryType: job.RetryNone}
	e.publishDue(t, "c", "j", scheduled, job.Action{
		ActionSpec:  httpAct(main.URL, none),
		ErrorAction: &job.ErrorAction{ActionSpec: httpAct(fallback.URL, none)},
	})
	waits := loggedWaits(t, &logs, "error action not scheduled", 3)
	if want := []string{"50ms", "100ms", "200ms"}; !slices.Equal(waits, want) {
		t.Errorf("waits before the error action was published again %v, want %v", waits, want)
	}
	if n := len(fallback.callsSoFar()); n != 0 {
		t.Fatalf("the error action ran %d times while the stream refused it", n)
	}
	full := st.CachedInfo().Config
	full.MaxMsgs = -1 // the stream takes messages again
	if _, err := e.js.UpdateStream(ctx, full); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, deadline, "the error action to run", func() bool { return len(fallback.callsSoFar()) == 1 }, logs.String)
	testenv.Eventually(t, deadline, "both due messages to be acknowledged", func() bool { return e.dueMessages(t) == 0 })
	if n := len(main.callsSoFar()); n != 1 {
		t.Errorf("the failed action was called %d times, want 1", n)
	}
}

// resultRefused deletes the results stream, runs a worker (edited by edit) and an occurrence
// whose target answers, and returns once the worker has had its result refused refusals times.
func (e *env) resultRefused(t *testing.T, refusals int, edit func(*consumer.Config)) (tg *target, tag string, stop func() error) {
	t.Helper()
	if err := e.js.DeleteStream(context.Background(), e.subjects.ResultsStream()); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	tg = newTarget(t)
	stop = e.loggedWorker(t, &logs, edit)
	tag = e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	loggedWaits(t, &logs, "result not published", refusals)
	return tg, tag, stop
}

// refuseMore limits a stream to the one message it may hold, refusing any more (its storage
// full, as JetStream would be).
func (e *env) refuseMore(t *testing.T, stream string) jetstream.Stream {
	t.Helper()
	ctx := context.Background()
	st, err := e.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgs, cfg.Discard = 1, jetstream.DiscardNew
	if st, err = e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return st
}
