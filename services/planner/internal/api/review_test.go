package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/tlstest"
	"github.com/resched/resched/shared/job"
)

// The cases of a code review of the intake (issue 9), each through the API; each failed before
// its fix.

// A job whose series ran out while its collection was disabled ends Completed when the
// collection is enabled again, rather than staying Enabled with a next time in the past, out
// of the due set, forever.
func TestEnablingACollectionEndsASeriesThatRanOut(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", `{"startTime":"2024-01-01T11:01:00Z","action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},
		"recurrence":{"frequency":"Minute","endTime":"2024-01-01T11:05:00Z"}}`, nil)
	e.ok(t, "collections.disable.c", "", nil)
	e.clock.Store(t0.Add(time.Hour).UnixNano())
	e.ok(t, "collections.enable.c", "", nil)
	var d job.Definition
	e.ok(t, "jobs.get.c.j", "", &d)
	if d.Properties.State != job.StateCompleted || d.Properties.Status.NextExecutionTime != nil {
		t.Fatalf("after enabling: state %s, status %+v; want Completed without a next time", d.Properties.State, d.Properties.Status)
	}
}

// A startTime whose instant falls in the year 10000 is refused, naming the field, and nothing
// is stored: the collection still lists.
func TestStartTimeBeyondTheYear9998IsRefused(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	a := e.fail(t, "jobs.put.c.j", `{"startTime":"9999-12-31T23:30:00","action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},
		"recurrence":{"frequency":"Day","timeZone":"Pacific Standard Time"}}`, "400", "BadRequest")
	if !slices.Equal(a.paths(), []string{"startTime"}) {
		t.Fatalf("problems at %v, want startTime", a.paths())
	}
	e.fail(t, "jobs.get.c.j", "", "404", "ResourceNotFound")
	e.ok(t, "jobs.list.c", "", nil)
}

// A patch larger than a definition may be is refused before anything is merged: a patch of
// about a megabyte with 94,000 members held the endpoint for minutes before.
func TestHugePatchIsRefusedBeforeMerging(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.j", hourly, nil)
	var b strings.Builder
	b.WriteString(`{"properties":{`)
	for i := range 94_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%x":0`, i) // under the 1 MB a NATS message may carry
	}
	b.WriteString(`}}`)
	a := e.fail(t, "jobs.patch.c.j", b.String(), "400", "BadRequest")
	if !strings.Contains(a.Error.Message, "16 KiB") {
		t.Fatalf("refusal %q does not give the limit", a.Error.Message)
	}
}

// A collection's maxRecurrence of a million weeks does not overflow into allowing everything:
// an hourly job recurs more often than that.
func TestHugeMaxRecurrenceDoesNotOverflow(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{"quota":{"maxRecurrence":{"frequency":"Week","interval":1000000}}}`)
	e.fail(t, "jobs.put.c.j", hourly, "409", "Conflict")
}

// Accepted before and failing at every fire, now refused at put naming the field: a control
// character in a header value, text that is not UTF-8, a PFX that is not base64, that the
// password does not open, or that asks for more key derivation than is accepted (which held the
// planner, for minutes with a count of 2^31).
func TestRefusedAtPutRatherThanAtEveryFire(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	pfx := tlstest.PFX(t, "right")
	request := func(inner string) string {
		return `{"action":{"type":"Https","request":{"uri":"https://x/","method":"POST",` + inner + `}}}`
	}
	for _, c := range []struct{ name, body, path string }{
		{"NUL in a header", request(`"headers":{"X-Trace":"a\u0000b"}`), `action.request.headers["X-Trace"]`},
		{"invalid UTF-8", request("\"body\":\"caf\xe9\""), "action.request.body"},
		{"pfx not base64", request(`"authentication":{"type":"ClientCertificate","pfx":"not base64!","password":"right"}`), "action.request.authentication.pfx"},
		{"pfx with another password", request(`"authentication":{"type":"ClientCertificate","pfx":"` + pfx + `","password":"wrong"}`), "action.request.authentication.pfx"},
		{"pfx asking too much work", request(`"authentication":{"type":"ClientCertificate","pfx":"` + tlstest.PFXWithIterations(t, "right", 400_000) + `","password":"right"}`), "action.request.authentication.pfx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := e.fail(t, "jobs.put.c.j", c.body, "400", "BadRequest")
			if !slices.Equal(a.paths(), []string{c.path}) {
				t.Fatalf("problems %+v, want one at %s", a.Error.Details, c.path)
			}
			e.fail(t, "jobs.get.c.j", "", "404", "ResourceNotFound")
		})
	}
}

// A ClientCertificate job answers with the certificate's thumbprint, subject and expiry, as
// the 2016-03-01 API did, and never with the PFX or its password; a patch that leaves the
// authentication alone keeps them.
func TestClientCertificateDetailsAreReturned(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	pfx := tlstest.PFX(t, "right")
	e.ok(t, "jobs.put.c.j", `{"action":{"type":"Https","request":{"uri":"https://x/","method":"POST",
		"authentication":{"type":"ClientCertificate","pfx":"`+pfx+`","password":"right"}}}}`, nil)
	for _, op := range []struct{ subject, body string }{{"jobs.get.c.j", ""}, {"jobs.patch.c.j", `{"state":"Disabled"}`}} {
		msg := e.ok(t, op.subject, op.body, nil)
		for _, want := range []string{`"certificateThumbprint":"`, `"certificateSubjectName":"CN=resched test"`, `"certificateExpirationDate":"2030-01-01T00:00:00Z"`} {
			if !strings.Contains(string(msg.Data), want) {
				t.Errorf("%s answered %s, without %s", op.subject, msg.Data, want)
			}
		}
		if strings.Contains(string(msg.Data), pfx[:20]) || strings.Contains(string(msg.Data), "right") {
			t.Errorf("%s answered a secret: %s", op.subject, msg.Data)
		}
	}
}
