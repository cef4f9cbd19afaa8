package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// A job deleted (through the API or the intake), or its collection, leaves nothing on the due
// stream. What was there (an occurrence no worker has taken, a retry waiting for its interval,
// an error action) went on calling the target after the delete, and a job put again under the
// name was handed it. No worker runs here, so the occurrences wait on the stream.
func TestADeletedJobLeavesNothingOnTheDueStream(t *testing.T) {
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	base, _, _ := started(t, testConfig(ns.ClientURL(), rs.URL()))
	testenv.Eventually(t, 20*time.Second, "/readyz answers 200", func() bool {
		code, _ := httpGet(t, base+"/readyz")
		return code == http.StatusOK
	})
	nc := ns.Connect(t)
	once := `{"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}` // at once
	for _, c := range []string{"c", "c2"} {
		request(t, nc, "scheduler.api.collections.put."+c, `{"properties":{}}`)
	}
	jobs := []string{"c.a", "c.b", "c.keep", "c2.x", "c2.y"}
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
}
