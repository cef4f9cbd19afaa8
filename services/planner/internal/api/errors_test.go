package api_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

func TestErrors(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.existing", hourly, nil)
	invalid := strings.Replace(hourly, `"interval": 1`, `"interval": 0`, 1)
	completed := strings.Replace(hourly, `"startTime"`, `"state": "Completed", "startTime"`, 1)
	long := strings.Repeat("a", 65)

	for _, tc := range []struct {
		name, subject, body string
		status, code        string
		path                string // a path the details must name; "" for none
		notStored           string // a job (c.<name>) that must not exist afterwards
	}{
		{"invalid definition", "jobs.put.c.j", invalid, "400", "BadRequest", "recurrence.interval", "j"},
		{"malformed JSON", "jobs.put.c.j", `{"action": `, "400", "BadRequest", "", "j"},
		{"not an object", "jobs.put.c.j", `[1, 2]`, "400", "BadRequest", "", "j"},
		{"a client may not set Completed", "jobs.put.c.j", completed, "400", "BadRequest", "state", "j"},
		{"patch to Completed", "jobs.patch.c.existing", `{"state": "Completed"}`, "400", "BadRequest", "state", ""},
		{"invalid patch", "jobs.patch.c.existing", `{"recurrence": {"interval": 0}}`, "400", "BadRequest", "recurrence.interval", ""},
		{"malformed patch", "jobs.patch.c.existing", `{"state": `, "400", "BadRequest", "", ""},
		{"unknown collection", "jobs.put.nowhere.j", hourly, "404", "ResourceNotFound", "", ""},
		{"unknown job", "jobs.get.c.missing", "", "404", "ResourceNotFound", "", ""},
		{"patch of an unknown job", "jobs.patch.c.missing", `{"state": "Disabled"}`, "404", "ResourceNotFound", "", "missing"},
		{"list of an unknown collection", "jobs.list.nowhere", "", "404", "ResourceNotFound", "", ""},
		{"unknown collection to get", "collections.get.nowhere", "", "404", "ResourceNotFound", "", ""},
		{"job name with a bad character", "jobs.put.c.bad$name", hourly, "400", "BadRequest", "job", ""},
		{"job name too long", "jobs.get.c." + long, "", "400", "BadRequest", "job", ""},
		{"collection name with a bad character", "collections.put.b+d", `{}`, "400", "BadRequest", "collection", ""},
		{"collection name too long", "jobs.list." + long, "", "400", "BadRequest", "collection", ""},
		// A dot in a name makes the subject longer; it is refused as a name, not left unanswered.
		{"job name with a dot", "jobs.put.c.my.job", hourly, "400", "BadRequest", "job", ""},
		{"job name with dots in a get", "jobs.get.c.a.b.c", "", "400", "BadRequest", "job", ""},
		{"collection name with a dot", "collections.put.team.orders", `{}`, "400", "BadRequest", "collection", ""},
		{"collection name with a dot in a listing", "jobs.list.team.orders", "", "400", "BadRequest", "collection", ""},
		{"invalid collection", "collections.put.x", `{"properties": {"quota": {"maxJobCount": "ten"}}}`, "400", "BadRequest", "properties.quota.maxJobCount", ""},
		{"malformed list body", "jobs.list.c", `{"top": `, "400", "BadRequest", "", ""},
		{"top of the wrong type", "jobs.list.c", `{"top": "ten"}`, "400", "BadRequest", "top", ""},
		{"top not a whole number", "jobs.list.c", `{"top": 1.5}`, "400", "BadRequest", "top", ""},
		{"negative skip", "collections.list", `{"skip": -1}`, "400", "BadRequest", "skip", ""},
		{"unknown state filter", "jobs.list.c", `{"state": "Sleeping"}`, "400", "BadRequest", "state", ""},
		{"unknown status filter", "jobs.history.c.existing", `{"status": "Exploded"}`, "400", "BadRequest", "status", ""},
		{"preview without a job", "preview", `{"count": 3}`, "400", "BadRequest", "job", ""},
		{"preview with a bad now", "preview", `{"job": {}, "now": "yesterday"}`, "400", "BadRequest", "now", ""},
		{"malformed preview", "preview", `not json`, "400", "BadRequest", "", ""},
		{"preview of more runs than a page", "preview", `{"job": {}, "count": 1001}`, "400", "BadRequest", "count", ""},
		{"negative preview count", "preview", `{"job": {}, "count": -1}`, "400", "BadRequest", "count", ""},
		{"more runs than a page", "jobs.runs.c.existing", `{"count": 1001}`, "400", "BadRequest", "count", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.fail(t, tc.subject, tc.body, tc.status, tc.code)
			if tc.path != "" && !slices.Contains(a.paths(), tc.path) {
				t.Errorf("details name %v, want %q among them", a.paths(), tc.path)
			}
			// A refused request's message, the header most clients show alone, names its field.
			if request := strings.HasPrefix(a.Error.Message, "the request is invalid"); request && tc.path != "" &&
				!strings.Contains(a.Error.Message, "invalid: "+tc.path+": ") && !strings.Contains(a.Error.Message, "invalid: "+tc.path+" name ") {
				t.Errorf("message %q does not name %s", a.Error.Message, tc.path)
			}
			if tc.notStored != "" {
				e.fail(t, "jobs.get.c."+tc.notStored, "", "404", "ResourceNotFound")
			}
		})
	}
	// the job the failed patches aimed at is unchanged
	var d job.Definition
	e.ok(t, "jobs.get.c.existing", "", &d)
	if d.Properties.State != job.StateEnabled || d.Properties.Recurrence.IntervalOrDefault() != 1 {
		t.Fatalf("failed patches changed the job: %+v", d.Properties)
	}
}

func TestQuotas(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "q", `{"quota": {"maxJobCount": 1, "maxRecurrence": {"frequency": "Hour", "interval": 1}}}`)
	e.ok(t, "jobs.put.q.first", hourly, nil)

	e.fail(t, "jobs.put.q.second", hourly, "409", "Conflict")
	e.fail(t, "jobs.get.q.second", "", "404", "ResourceNotFound")

	everyMinute := strings.Replace(hourly, `"frequency": "Hour"`, `"frequency": "Minute"`, 1)
	e.fail(t, "jobs.put.q.first", everyMinute, "409", "Conflict")
	e.fail(t, "jobs.patch.q.first", `{"recurrence": {"frequency": "Minute"}}`, "409", "Conflict")
	var d job.Definition
	e.ok(t, "jobs.get.q.first", "", &d)
	if d.Properties.Recurrence.Frequency != job.Hour {
		t.Fatalf("a refused put changed the job: recurrence %+v", d.Properties.Recurrence)
	}
	// replacing the one job needs no room, and two hours is within the quota
	e.ok(t, "jobs.put.q.first", strings.Replace(hourly, `"interval": 1`, `"interval": 2`, 1), nil)
}

// Redis gone is ServerBusy (503): sent again later, the request may work. The answer does not
// name Redis's address, which the error the planner met does ("dial tcp 10.0.0.5:6379: …"):
// it went to any client, another team's included, as a 500 InternalError.
func TestRedisGoneIsServerBusyAndNamesNoAddress(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.redis.MaxRetries, s.redis.DialerRetries = -1, 1 }) // fail fast
	e.putCollection(t, "c", `{}`)
	e.redis.Stop()
	_, port, _ := net.SplitHostPort(e.redis.Addr)
	for _, r := range []struct{ subject, body string }{{"jobs.get.c.j", ""}, {"jobs.put.c.j", hourly}, {"jobs.list.c", ""}} {
		msg := e.call(t, r.subject, r.body)
		a := e.fail(t, r.subject, r.body, "503", "ServerBusy")
		if len(a.Error.Details) != 0 || !strings.Contains(a.Error.Message, "Redis did not answer") {
			t.Errorf("%s: %+v, want a message saying Redis did not answer, without details", r.subject, a.Error)
		}
		if strings.Contains(string(msg.Data), port) || strings.Contains(msg.Header.Get(micro.ErrorHeader), port) {
			t.Errorf("%s: the answer names Redis's port %s: %s", r.subject, port, msg.Data)
		}
	}
}

// Redis at its maxmemory (noeviction) refuses writes, and every command queued in a
// transaction, reads too. A put then gets an error naming the cause, not an internal error,
// and stores nothing; the jobs can still be listed, read and deleted, so that an operator can
// choose what to free; once memory is freed, puts work again.
func TestRedisOutOfMemory(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	for _, name := range []string{"a", "b", "c"} {
		e.ok(t, "jobs.put.c."+name, hourly, nil)
	}
	rdb := e.redis.Client(t)
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // any use is over it
		t.Fatal(err)
	}
	a := e.fail(t, "jobs.put.c.new", hourly, "507", "InsufficientStorage")
	if !strings.Contains(a.Error.Message, "maxmemory") {
		t.Errorf("message %q does not name Redis's maxmemory", a.Error.Message)
	}
	var page struct {
		Value []job.Definition `json:"value"`
	}
	e.ok(t, "jobs.list.c", "", &page)
	if len(page.Value) != 3 {
		t.Errorf("listed %d jobs out of memory, want 3", len(page.Value))
	}
	e.ok(t, "jobs.get.c.a", "", nil)
	e.ok(t, "jobs.history.c.a", "", nil)
	e.ok(t, "jobs.delete.c.a", "", nil)
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	e.fail(t, "jobs.get.c.new", "", "404", "ResourceNotFound")
	e.fail(t, "jobs.get.c.a", "", "404", "ResourceNotFound")
	e.ok(t, "jobs.put.c.new", hourly, nil)
}

// A change Redis's replicas did not acknowledge in time is answered ServerBusy: a failover
// could lose it, and the client sends it again.
func TestAChangeNotReplicatedIsServerBusy(t *testing.T) {
	e := newEnv(t, withStore(store.WithMinReplicas(1, 200*time.Millisecond)))
	_, port, _ := net.SplitHostPort(e.redis.Addr)
	rdb := e.redis.Client(t)
	if err := rdb.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err(); err != nil { // a replica syncs at once
		t.Fatal(err)
	}
	replica := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
	// A replica reported online may still be loading what it was sent: the first write waits.
	testenv.Eventually(t, 20*time.Second, "a first change acknowledged by the replica", func() bool {
		return e.call(t, "collections.put.c", `{}`).Header.Get("Nats-Service-Error-Code") == ""
	})
	e.ok(t, "jobs.put.c.a", hourly, nil)
	if err := syscall.Kill(replica.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(replica.PID(), syscall.SIGCONT) }()
	a := e.fail(t, "jobs.put.c.b", hourly, "503", "ServerBusy")
	if !strings.Contains(a.Error.Message, "RESCHED_PLANNER_MIN_REPLICAS") {
		t.Errorf("message %q does not name the setting", a.Error.Message)
	}
	if err := syscall.Kill(replica.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e.ok(t, "jobs.put.c.b", hourly, nil)
}
