package api_test

import (
	"slices"
	"strings"
	"testing"

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
		{"invalid collection", "collections.put.x", `{"properties": {"quota": {"maxJobCount": "ten"}}}`, "400", "BadRequest", "properties.quota.maxJobCount", ""},
		{"malformed list body", "jobs.list.c", `{"top": `, "400", "BadRequest", "", ""},
		{"top of the wrong type", "jobs.list.c", `{"top": "ten"}`, "400", "BadRequest", "top", ""},
		{"negative skip", "collections.list", `{"skip": -1}`, "400", "BadRequest", "skip", ""},
		{"unknown state filter", "jobs.list.c", `{"state": "Sleeping"}`, "400", "BadRequest", "state", ""},
		{"unknown status filter", "jobs.history.c.existing", `{"status": "Exploded"}`, "400", "BadRequest", "status", ""},
		{"preview without a job", "preview", `{"count": 3}`, "400", "BadRequest", "job", ""},
		{"preview with a bad now", "preview", `{"job": {}, "now": "yesterday"}`, "400", "BadRequest", "now", ""},
		{"malformed preview", "preview", `not json`, "400", "BadRequest", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.fail(t, tc.subject, tc.body, tc.status, tc.code)
			if tc.path != "" && !slices.Contains(a.paths(), tc.path) {
				t.Errorf("details name %v, want %q among them", a.paths(), tc.path)
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

// An error the client cannot act on (here Redis gone) is a 500 with a message and no details,
// for a read and for a put (written through a batch).
func TestInternalError(t *testing.T) {
	e := newEnv(t, func(s *setup) { s.redis.MaxRetries, s.redis.DialerRetries = -1, 1 }) // fail fast
	e.putCollection(t, "c", `{}`)
	e.redis.Stop()
	for _, r := range []struct{ subject, body string }{{"jobs.get.c.j", ""}, {"jobs.put.c.j", hourly}} {
		a := e.fail(t, r.subject, r.body, "500", "InternalError")
		if len(a.Error.Details) != 0 {
			t.Fatalf("%s: details %v, want none", r.subject, a.Error.Details)
		}
	}
}
