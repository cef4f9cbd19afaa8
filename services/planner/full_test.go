package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// A Redis at its maxmemory stops new jobs, not the ones it holds: with a real planner, a job
// that fires every second goes on firing while a put is refused 507, and the results of its
// attempts, which grow the history, wait in their stream until memory is freed. Before, the
// heartbeat, the leases and the dispatcher's reads were refused with the put, and every job of
// every collection stopped until memory was freed, and a planner could not start; and neither
// a job nor a collection could be disabled.
func TestJobsFireWhileRedisIsFull(t *testing.T) {
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	base, logs, stop := started(t, testConfig(ns.ClientURL(), rs.URL()))
	waitReady(t, base)
	nc := ns.Connect(t)
	request(t, nc, "scheduler.api.collections.put.c", `{"properties":{}}`)
	start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	request(t, nc, "scheduler.api.jobs.put.c.j", fmt.Sprintf(`{"startTime":%q,
		"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}},
		"recurrence":{"frequency":"Second","interval":1}}`, start.Format(time.RFC3339)))

	rdb := rs.Client(t)
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // any use is over it
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.ConfigSet(ctx, "maxmemory", "0").Err() })
	m, err := nc.Request("scheduler.api.jobs.put.c.other", []byte(`{"action":{"type":"Http","request":{"method":"GET","uri":"http://localhost:9/y"}}}`), 10*time.Second)
	if err != nil || m.Header.Get("Nats-Service-Error-Code") != "507" {
		t.Fatalf("a new job while Redis is full: %v %v %s, want 507", err, m.Header, m.Data)
	}

	dues := fetchDue(t, nc, 5)
	last := dues[len(dues)-1]
	if want := start.Add(4 * time.Second); last.Scheduled.Before(want) {
		t.Errorf("fifth occurrence scheduled %v, want %v or later", last.Scheduled, want)
	}
	// A planner (re)started meanwhile, as in a rolling restart, starts and takes over: its
	// start reads the data layout without writing.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	base, logs2, _ := started(t, testConfig(ns.ClientURL(), rs.URL()))
	waitReady(t, base)
	if later := fetchDue(t, nc, 1)[0]; !later.Scheduled.After(last.Scheduled) {
		t.Errorf("after the restart, an occurrence of %v, want one after %v", later.Scheduled, last.Scheduled)
	}
	// A team can disable and enable its job, and an operator a collection, while Redis is full.
	// Disabled as PowerShell does it (the whole definition as read, its state changed), enabled
	// with the state alone (schedctl, the dashboard).
	asRead := getJob(t, nc)
	asRead.Properties.State = job.StateDisabled
	for _, p := range []struct{ state, patch string }{
		{"Disabled", mustJSON(t, asRead)},
		{"Enabled", `{"properties":{"state":"Enabled"}}`},
	} {
		body := request(t, nc, "scheduler.api.jobs.patch.c.j", p.patch)
		if !strings.Contains(string(body), `"state":"`+p.state+`"`) {
			t.Errorf("job %s while Redis is full: %s", p.state, body)
		}
	}
	if body := request(t, nc, "scheduler.api.collections.disable.c", ""); !strings.Contains(string(body), `"state":"Disabled"`) {
		t.Errorf("disable while Redis is full: %s", body)
	}
	if body := request(t, nc, "scheduler.api.collections.enable.c", ""); !strings.Contains(string(body), `"state":"Enabled"`) {
		t.Errorf("enable while Redis is full: %s", body)
	}
	seq := recordResult(t, nc, last)
	// The results consumer must have tried it and been refused before memory is freed, or
	// the checks below would pass on a consumer that had not yet looked.
	testenv.Eventually(t, 20*time.Second, "the results consumer refused by Redis", func() bool {
		return strings.Contains(logs2.String(), "results: Redis is at its maxmemory")
	})
	if n, _ := jobRecord(t, nc); n != 0 {
		t.Fatalf("%d executions recorded while Redis is full", n)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, nc, seq)
	if n, hist := jobRecord(t, nc); n != 1 || len(hist) != 1 || !hist[0].ExpectedExecutionTime.Equal(last.Scheduled) {
		t.Fatalf("once memory is freed: %d executions, history %+v; want the result of %v", n, hist, last.Scheduled)
	}
	var full int
	for _, r := range append(records(t, logs), records(t, logs2)...) {
		msg, _ := r["msg"].(string)
		if r["level"] == "ERROR" {
			t.Errorf("error logged: %v", r)
		}
		if strings.HasPrefix(msg, "results: Redis is at its maxmemory") {
			full++
		}
	}
	if full != 1 {
		t.Errorf("the results consumer said %d times that Redis is full, want once", full)
	}
}

// An operator who caps the due stream's size (nats stream edit --max-bytes), as sizing
// JetStream's store invites, gets a stream that refuses occurrences when full rather than one
// that drops the oldest unread: before, JetStream's default discard policy removed the
// occurrences waiting for a worker that was not there, and they were lost without a record.
// Now the planner's start makes the stream refuse, its publishes are refused while it is full,
// it says why, and every occurrence reaches the workers once they take what the stream holds.
func TestACappedDueStreamRefusesRatherThanDrops(t *testing.T) {
	ns := natstest.Start(t)
	_, js, subjects := ns.JetStream(t) // the streams as an earlier planner created them
	natstest.EditStream(t, js, subjects.DueStream(), func(c *jetstream.StreamConfig) { c.MaxBytes = 16 << 10 })
	base, logs, _ := started(t, testConfig(ns.ClientURL(), redistest.Start(t).URL()))
	waitReady(t, base)
	if n := waitLog(t, logs, "stream setting changed: it would have lost messages"); n["stream"] != subjects.DueStream() {
		t.Errorf("the start's note: %v", n)
	}
	nc := ns.Connect(t)
	request(t, nc, "scheduler.api.collections.put.c", `{"properties":{}}`)
	start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	const jobs = 10
	for i := range jobs {
		request(t, nc, fmt.Sprintf("scheduler.api.jobs.put.c.j%d", i), fmt.Sprintf(`{"startTime":%q,
			"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}},
			"recurrence":{"frequency":"Second","interval":1}}`, start.Format(time.RFC3339)))
	}
	testenv.Eventually(t, 30*time.Second, "the planner to say the due stream is full", func() bool {
		return strings.Contains(logs.String(), "the due stream is full")
	})
	full := time.Now()

	// A worker comes back and takes what the stream holds, then what follows.
	cons, err := js.CreateOrUpdateConsumer(context.Background(), subjects.DueStream(), jetstream.ConsumerConfig{
		Durable: "test-worker", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	seen := make([][]time.Time, jobs)
	caughtUp := func() bool {
		for _, s := range seen {
			if len(s) == 0 || !s[len(s)-1].After(full.Add(2*time.Second)) {
				return false
			}
		}
		return true
	}
	testenv.Eventually(t, 30*time.Second, "every job's occurrences past the time the stream was full", func() bool {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			d, err := bus.DecodeDue(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			if now := time.Now(); now.Before(d.Scheduled) {
				t.Errorf("%s at %v received early, at %v", d.Job, d.Scheduled, now)
			}
			var i int
			if _, err := fmt.Sscanf(d.Job, "j%d", &i); err != nil || i >= jobs {
				t.Fatalf("an occurrence of job %q", d.Job)
			}
			seen[i] = append(seen[i], d.Scheduled)
			_ = m.Ack()
		}
		return caughtUp()
	})
	for i, s := range seen {
		for k, at := range s {
			if want := start.Add(time.Duration(k) * time.Second); !at.Equal(want) {
				t.Fatalf("j%d's occurrence %d was scheduled %v, want %v: occurrences %v", i, k+1, at, want, s)
			}
		}
	}
}
