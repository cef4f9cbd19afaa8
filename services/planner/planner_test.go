package main

import (
	"context"
	"encoding/json"
	"fmt"
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

// The whole planner in one process against real NATS and Redis, on the real clock: a definition
// published with a plain core-NATS publish fires at its times on the due subject, the results
// reported for its occurrences end it Completed, and a cancel stops it cleanly.
func TestPlannerEndToEnd(t *testing.T) {
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	base, logs, stop := started(t, testConfig(ns.ClientURL(), rs.URL()))
	waitReady(t, base)
	nc := ns.Connect(t)
	events := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe("scheduler.events.c.j.>", events)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	request(t, nc, "scheduler.api.collections.put.c", `{"properties":{}}`)
	start := time.Now().UTC().Truncate(time.Second).Add(3 * time.Second)
	def := fmt.Sprintf(`{"startTime":%q,"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}},
		"recurrence":{"frequency":"Second","interval":1,"count":2}}`, start.Format(time.RFC3339))
	if err := nc.Publish("scheduler.jobs.c.j", []byte(def)); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events); ev.Kind != bus.EventAccepted || ev.NextExecutionTime == nil || !ev.NextExecutionTime.Equal(start) {
		t.Fatalf("first event %+v, want accepted with the next execution at %v", ev, start)
	}

	dues := fetchDue(t, nc, 2)
	for i, d := range dues {
		if want := start.Add(time.Duration(i) * time.Second); !d.Scheduled.Equal(want) || d.Occurrence != i+1 {
			t.Errorf("due %d: scheduled %v occurrence %d, want %v occurrence %d", i, d.Scheduled, d.Occurrence, want, i+1)
		}
	}

	for _, d := range dues {
		recordResult(t, nc, d)
	}
	if ev := nextEvent(t, events); ev.Kind != bus.EventCompleted {
		t.Fatalf("event %+v, want completed", ev)
	}
	// The planners apply results in parallel: the last occurrence's result, which completes
	// the job, may be recorded before the first one's.
	var got job.Definition
	testenv.Eventually(t, 5*time.Second, "both results recorded", func() bool {
		got = job.Definition{}
		if err := json.Unmarshal(request(t, nc, "scheduler.api.jobs.get.c.j", ""), &got); err != nil {
			t.Fatal(err)
		}
		st := got.Properties.Status
		return st != nil && st.ExecutionCount == 2
	})
	if got.Properties.State != job.StateCompleted {
		t.Errorf("job after its results: state %s, status %+v", got.Properties.State, got.Properties.Status)
	}
	_, metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{"resched_planner_published_total 2", `resched_planner_results_total{status="Completed"} 2`,
		"resched_planner_fire_lag_seconds_count 2", "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	for _, r := range records(t, logs) {
		if r["level"] == "ERROR" {
			t.Errorf("error logged: %v", r)
		}
	}
	if recs := records(t, logs); recs[len(recs)-1]["msg"] != "planner stopped" {
		t.Errorf("last log record %v, want planner stopped", recs[len(recs)-1])
	}
}

// recordResult publishes the result a worker would of d's attempt: Completed, its last. It
// returns the result's sequence on the results stream.
func recordResult(t *testing.T, nc *nats.Conn, d bus.Due) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := bus.Result{Collection: "c", Job: "j", Scheduled: d.Scheduled, ExecutionTag: d.ExecutionTag, Occurrence: d.Occurrence,
		Incarnation: d.Incarnation, ActionName: job.ActionNameMain, StartTime: d.Scheduled, EndTime: d.Scheduled.Add(time.Millisecond),
		Status: job.ExecutionCompleted, MainDone: true, Final: true}
	b, _ := json.Marshal(r)
	ack, err := js.Publish(context.Background(), "scheduler.results.c.j", b, jetstream.WithMsgID(bus.ResultMsgID(r)))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// waitApplied waits until the planners have applied (and acknowledged) the results stream up
// to seq: what a result changes is in Redis then, and what it did not change never will be.
func waitApplied(t *testing.T, nc *nats.Conn, seq uint64) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("results up to %d applied", seq), func() bool {
		c, err := js.Consumer(context.Background(), "SCHEDULER_RESULTS", bus.ResultsConsumer)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.AckFloor.Stream >= seq
	})
}

// request sends an API request and returns the reply body, failing on an error reply.
func request(t *testing.T, nc *nats.Conn, subject, body string) []byte {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("%s: error %s: %s", subject, code, m.Data)
	}
	return m.Data
}

func nextEvent(t *testing.T, events <-chan *nats.Msg) bus.Event {
	t.Helper()
	select {
	case m := <-events:
		var ev bus.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20 s")
		return bus.Event{}
	}
}

// fetchDue reads n due occurrences of c/j as a worker would, checking that none arrives
// before its scheduled time.
func fetchDue(t *testing.T, nc *nats.Conn, n int) []bus.Due {
	t.Helper()
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "SCHEDULER_DUE", jetstream.ConsumerConfig{
		Durable: "test-worker", FilterSubject: "scheduler.due.c.j", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	var out []bus.Due
	for len(out) < n && time.Now().Before(deadline) {
		batch, err := cons.Fetch(n-len(out), jetstream.FetchMaxWait(time.Until(deadline)))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			received := time.Now()
			var d bus.Due
			if err := json.Unmarshal(m.Data(), &d); err != nil {
				t.Fatal(err)
			}
			if received.Before(d.Scheduled) {
				t.Errorf("occurrence of %v received early, at %v", d.Scheduled, received)
			}
			if m.Subject() != "scheduler.due.c.j" {
				t.Errorf("due on %s", m.Subject())
			}
			_ = m.Ack()
			out = append(out, d)
		}
	}
	if len(out) < n {
		t.Fatalf("%d of %d due occurrences within 20 s", len(out), n)
	}
	return out
}

// A NATS server that comes back without its store (a pod without a persistent volume) has no
// streams: the planner makes them again when its consumers find them gone, and definitions
// published afterwards are applied. Before, the streams came back only when a worker made
// them, or at the planner's next start; a planner alone waited for ever.
func TestPlannerMakesTheStreamsAgainWhenNATSLostThem(t *testing.T) {
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	base, logs, _ := started(t, testConfig(ns.ClientURL(), rs.URL()))
	waitReady(t, base)
	nc := ns.Connect(t)
	request(t, nc, "scheduler.api.collections.put.c", `{"properties":{}}`)

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("planner:\n%s", logs.String())
		}
	})
	ns.RestartEmpty()
	// The consumer's pulls go unanswered: two missed heartbeats (10 s) end them.
	testenv.Eventually(t, 30*time.Second, "the streams made again", func() bool {
		return strings.Contains(logs.String(), "was missing: the streams are made again")
	})
	events := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe("scheduler.events.c.j.>", events)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	def := `{"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}},"recurrence":{"frequency":"Hour"}}`
	testenv.Eventually(t, 20*time.Second, "the intake stream to take the definition", func() bool {
		_, err := js.Publish(context.Background(), "scheduler.jobs.c.j", []byte(def))
		return err == nil
	})
	if ev := nextEvent(t, events); ev.Kind != bus.EventAccepted {
		t.Fatalf("event %+v, want the definition accepted", ev)
	}
}
