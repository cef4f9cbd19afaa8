package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// A job deleted (through the API or the intake), or its collection, leaves nothing on the due
// stream. What was there (an occurrence no worker has taken, a retry waiting for its interval,
// an error action) went on calling the target after the delete, and a job put again under the
// name was handed it. No worker runs here: the test takes the occurrences as one would.
func TestADeletedJobLeavesNothingOnTheDueStream(t *testing.T) {
	nc, base := readyPlanner(t)
	// c/keep's occurrence is the stream's first, as a retry waiting among newer occurrences
	// is; those of the jobs f1 to f5 are delivered, then those of the jobs deleted wait.
	js, cons := retriesWaiting(t, nc, "c.keep", "c.f1", "c.f2", "c.f3", "c.f4", "c.f5", "c.a", "c.b", "c2.x", "c2.y")

	// As a worker would, one waits for more while the jobs are deleted.
	next, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	request(t, nc, "scheduler.api.jobs.delete.c.a", "")
	del := nats.NewMsg("scheduler.jobs.c.b")
	del.Header.Set("Scheduler-Operation", "delete")
	if err := nc.PublishMsg(del); err != nil {
		t.Fatal(err)
	}
	request(t, nc, "scheduler.api.collections.delete.c2", "")
	testenv.Eventually(t, 20*time.Second, "only c/keep left on the due stream", func() bool {
		w := dueSubjects(t, js)
		return len(w) == 1 && w["scheduler.due.c.keep"] == 1
	})
	// The job left keeps its retry: it comes back to the worker after its delay, alone.
	if again := subjectsOf(next); !slices.Equal(again, []string{"scheduler.due.c.keep"}) {
		t.Errorf("retried after the deletes: %v, want c/keep's alone", again)
	}
	purgedCounted(t, base, 4)
}

// A job disabled (put, patched or published disabled), or its collection disabled or
// suspended, leaves nothing on the due stream either: its retries waiting there went on
// calling a target that failed after the job was disabled, 4 more calls over 2 minutes with
// the default retry policy. A job patched but left enabled keeps its retry.
func TestADisabledJobLeavesNothingOnTheDueStream(t *testing.T) {
	nc, base := readyPlanner(t)
	js, cons := retriesWaiting(t, nc, "c.keep", "c.on", "c.put", "c.patch", "c.intake", "c2.x", "c2.y", "c3.z")
	next, err := cons.Fetch(8, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	disabled := `{"properties":{"state":"Disabled"}}`
	request(t, nc, "scheduler.api.jobs.patch.c.on", `{"properties":{"state":"Enabled"}}`)
	request(t, nc, "scheduler.api.jobs.put.c.put",
		`{"properties":{"state":"Disabled","action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}}`)
	request(t, nc, "scheduler.api.jobs.patch.c.patch", disabled)
	if err := nc.Publish("scheduler.jobs.c.intake",
		[]byte(`{"properties":{"state":"Disabled","action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}}`)); err != nil {
		t.Fatal(err)
	}
	request(t, nc, "scheduler.api.collections.disable.c2", "")
	request(t, nc, "scheduler.api.collections.put.c3", `{"properties":{"state":"Suspended"}}`)
	testenv.Eventually(t, 20*time.Second, "c/keep and c/on left on the due stream alone", func() bool {
		w := dueSubjects(t, js)
		return len(w) == 2 && w["scheduler.due.c.keep"] == 1 && w["scheduler.due.c.on"] == 1
	})
	if again := subjectsOf(next); !slices.Equal(again, []string{"scheduler.due.c.keep", "scheduler.due.c.on"}) {
		t.Errorf("retried after the changes: %v, want c/keep's and c/on's alone", again)
	}
	purgedCounted(t, base, 6)
}

// retriesWaiting creates the jobs (<collection>.<job>, and their collections), each to run at
// once, and takes their occurrences as a worker would: it delivers those of the jobs named f<n>
// and hands each other back to be retried 2 s later, as after a failed attempt, so that the
// retries wait unacknowledged in the consumer it answers.
func retriesWaiting(t *testing.T, nc *nats.Conn, jobs ...string) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	once := `{"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}` // at once
	colls := map[string]bool{}
	for _, j := range jobs {
		if c, _, _ := strings.Cut(j, "."); !colls[c] {
			colls[c] = true
			request(t, nc, "scheduler.api.collections.put."+c, `{"properties":{}}`)
		}
		request(t, nc, "scheduler.api.jobs.put."+j, once)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "every job's occurrence on the due stream", func() bool {
		return len(dueSubjects(t, js)) == len(jobs)
	})
	ctx := context.Background()
	cons, err := js.CreateOrUpdateConsumer(ctx, "SCHEDULER_DUE", bus.WorkerConsumerConfig(5*time.Second, 100))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(len(jobs), jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for m := range batch.Messages() {
		_, job, _ := strings.Cut(strings.TrimPrefix(m.Subject(), "scheduler.due."), ".")
		settle := func() error { return m.NakWithDelay(2 * time.Second) }
		if strings.HasPrefix(job, "f") {
			settle = func() error { return m.DoubleAck(ctx) }
		}
		if err := settle(); err != nil {
			t.Fatal(err)
		}
		taken++
	}
	if taken != len(jobs) {
		t.Fatalf("a worker took %d occurrences, want %d", taken, len(jobs))
	}
	return js, cons
}

// subjectsOf waits for a fetch's messages and answers their subjects, sorted.
func subjectsOf(b jetstream.MessageBatch) []string {
	var out []string
	for m := range b.Messages() {
		out = append(out, m.Subject())
	}
	slices.Sort(out)
	return out
}

// The purge of a deleted job takes its incarnation's messages alone, and those that carry
// none: a job put again under its name (another incarnation) keeps its own, on the same
// subject, whichever comes first. A planner taking up the purge of a job deleted 20 s before
// meets that case.
func TestAPurgeTakesTheDeletedIncarnationsMessagesAlone(t *testing.T) {
	nc, _ := readyPlanner(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	action := json.RawMessage(`{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}`)
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// On c/j's subject: the new job's, the deleted one's (occurrence, then error action), the
	// new job's again, one without an incarnation (an earlier release's); and another job's.
	for i, m := range []struct {
		job         string
		incarnation int64
	}{{"j", 9}, {"j", 7}, {"j", 7}, {"j", 9}, {"j", 0}, {"k", 7}} {
		data := bus.AppendDue(nil, "c", m.job, m.incarnation, at.Add(time.Duration(i)*time.Second), i, action)
		if _, err := js.Publish(ctx, "scheduler.due.c."+m.job, data); err != nil {
			t.Fatal(err)
		}
	}
	purger := &duePurger{js: js, stream: "SCHEDULER_DUE"}
	if err := purger.PurgeIncarnation(ctx, "scheduler.due.c.j", 7); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "SCHEDULER_DUE")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject("scheduler.due.c.>"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		d, err := bus.DecodeDue(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, fmt.Sprintf("%s@%d#%d", d.Job, d.Incarnation, d.Occurrence))
		seq = m.Sequence + 1
	}
	if want := []string{"j@9#0", "j@9#3", "k@7#5"}; !slices.Equal(left, want) {
		t.Errorf("left on the due stream %v, want %v", left, want)
	}
}

// dueSubjects counts the messages the due stream holds by subject.
func dueSubjects(t *testing.T, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	st, err := js.Stream(context.Background(), "SCHEDULER_DUE")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter("scheduler.due.>"))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

// readyPlanner starts a planner on test servers, waits until it is ready and connects to its
// NATS server; it answers the connection and the planner's HTTP address.
func readyPlanner(t *testing.T) (*nats.Conn, string) {
	t.Helper()
	ns := natstest.Start(t)
	base, _, _ := started(t, testConfig(ns.ClientURL(), redistest.Start(t).URL()))
	waitReady(t, base)
	return ns.Connect(t), base
}

// purgedCounted checks the planner's count of the messages it removed from the due stream.
func purgedCounted(t *testing.T, base string, want int) {
	t.Helper()
	if got := counter(t, base, "purged_total"); got != want {
		t.Errorf("resched_planner_purged_total %d, want %d", got, want)
	}
}

// A job deleted while a worker runs its attempt, then created again under its name, is another
// job: the attempt's result, reported after, is the deleted job's. It was recorded for the new
// one (seen with make run: a job never run showed an execution and its history an entry), and
// is not now; a result of the new job is.
func TestAResultOfADeletedJobIsNotRecordedForItsSuccessor(t *testing.T) {
	nc, _ := readyPlanner(t)
	request(t, nc, "scheduler.api.collections.put.c", `{"properties":{}}`)
	request(t, nc, "scheduler.api.jobs.put.c.j", `{"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}`)
	old := fetchDue(t, nc, 1)[0] // taken by a worker, which runs it
	request(t, nc, "scheduler.api.jobs.delete.c.j", "")
	request(t, nc, "scheduler.api.jobs.put.c.j",
		`{"startTime":"2100-01-01T00:00:00Z","action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/y"}}}`)
	waitApplied(t, nc, recordResult(t, nc, old))
	if n, hist := jobRecord(t, nc); n != 0 || len(hist) != 0 {
		t.Fatalf("the job created after the delete: %d executions, history %+v; want none", n, hist)
	}

	request(t, nc, "scheduler.api.jobs.run.c.j", "")
	now := fetchDue(t, nc, 1)[0]
	if now.Incarnation == 0 || now.Incarnation == old.Incarnation {
		t.Fatalf("incarnations: %d before the delete, %d after", old.Incarnation, now.Incarnation)
	}
	waitApplied(t, nc, recordResult(t, nc, now))
	if n, hist := jobRecord(t, nc); n != 1 || len(hist) != 1 || !hist[0].ExpectedExecutionTime.Equal(now.Scheduled) {
		t.Fatalf("after its own run: %d executions, history %+v; want its run alone", n, hist)
	}
}

// jobRecord reads c/j's execution count and history through the API.
func jobRecord(t *testing.T, nc *nats.Conn) (int, []job.HistoryEntry) {
	t.Helper()
	d := getJob(t, nc)
	var page struct{ Value []job.HistoryEntry }
	if err := json.Unmarshal(request(t, nc, "scheduler.api.jobs.history.c.j", ""), &page); err != nil {
		t.Fatal(err)
	}
	if d.Properties.Status == nil {
		return 0, page.Value
	}
	return d.Properties.Status.ExecutionCount, page.Value
}
