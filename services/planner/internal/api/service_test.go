package api_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/version"
	"github.com/resched/resched/services/planner/internal/api"
)

// The service answers `nats micro ls` / `nats micro info scheduler` with the subjects of
// docs/nats-api.md, exactly.
func TestDiscoverable(t *testing.T) {
	e := newEnv(t)

	msg, err := e.nc.Request("$SRV.PING.scheduler", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Name != api.ServiceName || ping.Version != version.Semver() {
		t.Fatalf("ping answered %s (%v)", msg.Data, err)
	}

	msg, err = e.nc.Request("$SRV.INFO.scheduler", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, ep := range info.Endpoints {
		subjects = append(subjects, ep.Subject)
		// The subject as a client writes it, the wildcards named.
		want := map[string]string{"jobs-get": "scheduler.api.jobs.get.<collection>.<job>",
			"jobs-list": "scheduler.api.jobs.list.<collection>", "collections-put": "scheduler.api.collections.put.<collection>",
			"preview": "scheduler.api.preview"}[ep.Name]
		if want != "" && ep.Metadata["request"] != want {
			t.Errorf("endpoint %s: request %q, want %q", ep.Name, ep.Metadata["request"], want)
		}
		if ep.QueueGroup != api.QueueGroup {
			t.Errorf("endpoint %s: queue group %q, want %q", ep.Name, ep.QueueGroup, api.QueueGroup)
		}
	}
	// The last name is ">": a name with a dot reaches the endpoint and is refused there.
	want := []string{
		"scheduler.api.collections.delete.>",
		"scheduler.api.collections.disable.>",
		"scheduler.api.collections.enable.>",
		"scheduler.api.collections.get.>",
		"scheduler.api.collections.list",
		"scheduler.api.collections.put.>",
		"scheduler.api.jobs.bulk.>",
		"scheduler.api.jobs.delete.*.>",
		"scheduler.api.jobs.get.*.>",
		"scheduler.api.jobs.history.*.>",
		"scheduler.api.jobs.list.>",
		"scheduler.api.jobs.patch.*.>",
		"scheduler.api.jobs.put.*.>",
		"scheduler.api.jobs.run.*.>",
		"scheduler.api.jobs.runs.*.>",
		"scheduler.api.preview",
	}
	slices.Sort(subjects)
	if !slices.Equal(subjects, want) {
		t.Fatalf("endpoint subjects\n%v\nwant\n%v", subjects, want)
	}
	if info.Name != api.ServiceName || info.Metadata["prefix"] != "scheduler" || info.Metadata["version"] != version.String() {
		t.Fatalf("info %+v", info.ServiceIdentity)
	}
}

// Two planners share the requests: each request is answered by exactly one of them.
func TestPlannersShareRequests(t *testing.T) {
	e := newEnv(t)
	second := e.start(t, e.nats.Connect(t))
	const n = 20
	for range n {
		e.ok(t, "collections.list", "", nil)
	}
	handled := func() int {
		total := 0
		for _, s := range []micro.Service{e.api, second} {
			for _, ep := range s.Stats().Endpoints {
				total += ep.NumRequests
			}
		}
		return total
	}
	testenv.Eventually(t, 5*time.Second, "the statistics to count every request", func() bool { return handled() >= n })
	if got := handled(); got != n {
		t.Fatalf("%d requests handled by the two planners, want %d", got, n)
	}
}

// Stopping lets the request in hand finish and answer, and a second Stop is harmless.
func TestStopFinishesTheRequestInHand(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	second := e.start(t, e.nats.Connect(t))
	if err := e.api.Stop(); err != nil { // only the second planner answers now
		t.Fatal(err)
	}
	// Once the server has the stopped planner's unsubscriptions, the request can reach only
	// the second one; before, it could reach the first's draining subscription and be
	// answered 503 there (a make test failed so, the second never seeing the request).
	if err := e.conn.Flush(); err != nil {
		t.Fatal(err)
	}
	answered := make(chan *nats.Msg, 1)
	go func() {
		msg, err := e.nc.Request("scheduler.api.jobs.put.c.j", []byte(hourly), 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		answered <- msg
	}()
	testenv.Eventually(t, 5*time.Second, "the request to be in hand", func() bool {
		for _, ep := range second.Stats().Endpoints {
			if ep.NumRequests > 0 {
				return true
			}
		}
		return false
	})
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := second.Stop(); err != nil && !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("second Stop: %v", err)
	}
	if msg := <-answered; msg == nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("the request in hand was not answered: %v", msg)
	}
}

// Stopping while requests keep arriving: those the subscription still delivers after Stop are
// answered (served, or refused as unavailable so the client tries again), and none reaches the
// stopped workers (a send on their closed channel panicked).
func TestStopWhileRequestsArrive(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	replies, err := e.nc.SubscribeSync(nats.NewInbox() + ".>")
	if err != nil {
		t.Fatal(err)
	}
	inbox := strings.TrimSuffix(replies.Subject, ">")
	const n = 2000
	for i := range n {
		if err := e.nc.PublishRequest("scheduler.api.jobs.get.c.j", inbox+strconv.Itoa(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.api.Stop(); err != nil {
		t.Fatal(err)
	}
	// Every request reached the planner's connection before Stop (the flush), so the drained
	// subscription hands each one to the handler: each is answered.
	for i := range n {
		msg, err := replies.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%d requests of %d answered: %v", i, n, err)
		}
		if code := msg.Header.Get(micro.ErrorCodeHeader); code != "404" && code != "503" {
			t.Fatalf("answer with error code %q: %s", code, msg.Data)
		}
	}
}
