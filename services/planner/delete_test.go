package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// A job deleted (through the API or the intake), or its collection, leaves nothing on the due
// stream. What was there (an occurrence no worker has taken, a retry waiting for its interval,
// an error action) went on calling the target after the delete, and a job put again under the
// name was handed it. No worker runs here: the test takes the occurrences as one would.
func TestADeletedJobLeavesNothingOnTheDueStream(t *testing.T) {
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	base, _, _ := started(t, testConfig(ns.ClientURL(), rs.URL()))
	waitReady(t, base)
	nc := ns.Connect(t)
	once := `{"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}` // at once
	for _, c := range []string{"c", "c2"} {
		request(t, nc, "scheduler.api.collections.put."+c, `{"properties":{}}`)
	}
	// c/keep's occurrence is the stream's first, as a retry waiting among newer occurrences
	// is; those of the jobs f1 to f5 are delivered, then those of the jobs deleted wait.
	jobs := []string{"c.keep", "c.f1", "c.f2", "c.f3", "c.f4", "c.f5", "c.a", "c.b", "c2.x", "c2.y"}
	for _, j := range jobs {
		request(t, nc, "scheduler.api.jobs.put."+j, once)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waiting := func() map[string]uint64 {
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
	testenv.Eventually(t, 20*time.Second, "every job's occurrence on the due stream", func() bool {
		return len(waiting()) == len(jobs)
	})
	// A worker takes them all, delivers f1 to f5 and hands each other back to be retried
	// later, as after a failed attempt: the retries wait unacknowledged in the consumer.
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
		settle := func() error { return m.NakWithDelay(2 * time.Second) }
		if strings.HasPrefix(m.Subject(), "scheduler.due.c.f") {
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

	// As a worker would, one waits for more while the jobs are deleted.
	next, err := cons.Fetch(len(jobs), jetstream.FetchMaxWait(5*time.Second))
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
		w := waiting()
		return len(w) == 1 && w["scheduler.due.c.keep"] == 1
	})
	// The job left keeps its retry: it comes back to the worker after its delay, alone.
	var again []string
	for m := range next.Messages() {
		again = append(again, m.Subject())
	}
	if len(again) != 1 || again[0] != "scheduler.due.c.keep" {
		t.Errorf("retried after the deletes: %v, want c/keep's alone", again)
	}
}
