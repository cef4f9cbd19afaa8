package arm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natsconn"
)

// planner is a Requester that answers every request with err (no planner, a time-out).
type planner struct{ err error }

func (p planner) RequestMsgWithContext(context.Context, *nats.Msg) (*nats.Msg, error) {
	return nil, p.err
}

// anyone grants every request: these tests are about what follows the authentication.
type anyone struct{}

func (anyone) Authenticate(*http.Request) (access.Grant, error) {
	return access.Grant{Subject: "test", Role: access.Operator, Scopes: []string{"*"}}, nil
}

// When the planners are not there or do not answer in time, the client gets ARM's retryable
// errors, not a hang or a 500; a path or a method the surface does not have is named so.
func TestAnswersWithoutPlanners(t *testing.T) {
	const job = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/c/jobs/j?api-version=2016-03-01"
	for _, c := range []struct {
		name, method, path string
		err                error
		status             int
		code               string
		says               string // in the message, when set
	}{
		{"no planner", "GET", job, nats.ErrNoResponders, 503, "ServerBusy", "no scheduler planner answered"},
		{"no answer in time", "GET", job, context.DeadlineExceeded, 504, "OperationTimedOut", "did not answer in time"},
		{"connection closed", "GET", job, nats.ErrConnectionClosed, 503, "ServerBusy", "cannot be reached"},
		// The gateway's connection lost while the request waited (natsconn.Conn): at once, not
		// after the request's deadline.
		{"connection lost in flight", "GET", job, natsconn.ErrConnectionLost, 503, "ServerBusy", "whether it was done is not known"},
		{"unknown path", "GET", "/subscriptions/s/providers/Microsoft.Web/sites?api-version=2016-03-01", nil, 404, "InvalidResourceType", ""},
		{"wrong method", "POST", job, nil, 405, "InvalidHttpVerb", ""},
		// A dot would split the planners' subject: no planner would get it, and 503 is retried.
		{"a job name the NATS API cannot carry", "GET", strings.Replace(job, "/jobs/j?", "/jobs/a.b?", 1), nats.ErrNoResponders, 400, "BadRequest", `jobName "a.b"`},
		{"its history", "GET", strings.Replace(job, "/jobs/j?", "/jobs/a.b/history?", 1), nats.ErrNoResponders, 400, "BadRequest", `jobName "a.b"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := New(Config{NATS: planner{err: c.err}, Subjects: bus.NewSubjects(""), Auth: anyone{}})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
			var body struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != c.status || body.Error.Code != c.code || body.Error.Message == "" ||
				!strings.Contains(body.Error.Message, c.says) {
				t.Errorf("%d %s, want %d with code %s saying %q", rec.Code, rec.Body, c.status, c.code, c.says)
			}
		})
	}
}

// sent is a Requester that keeps the bodies the gateway sends the planners, and answers as
// when none runs.
type sent struct{ bodies []string }

func (s *sent) RequestMsgWithContext(_ context.Context, m *nats.Msg) (*nats.Msg, error) {
	s.bodies = append(s.bodies, string(m.Data))
	return nil, nats.ErrNoResponders
}

// A body that starts with a UTF-8 byte-order mark (curl --data-binary @file of a file a
// Windows tool saved) reaches the planners without it: a job's merge patch is read by them
// as JSON, which refuses the mark.
func TestABodyIsSentWithoutItsByteOrderMark(t *testing.T) {
	const base = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/c"
	for _, c := range []struct{ method, path, body string }{
		{"PUT", base + "/jobs/j?api-version=2016-03-01", `{"properties": {"action": {"type": "Http"}}}`},
		{"PATCH", base + "/jobs/j?api-version=2016-03-01", `{"properties": {"state": "Disabled"}}`},
		{"PUT", base + "?api-version=2016-03-01", `{"location": "West US", "properties": {"sku": {"name": "Standard"}}}`},
	} {
		planners := &sent{}
		srv, err := New(Config{NATS: planners, Subjects: bus.NewSubjects(""), Auth: anyone{}})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader("\ufeff"+c.body)))
		if rec.Code != http.StatusServiceUnavailable || len(planners.bodies) != 1 || !strings.HasPrefix(planners.bodies[0], "{") {
			t.Errorf("%s %s: %d %s; sent %q", c.method, c.path, rec.Code, rec.Body, planners.bodies)
		}
	}
}

// conflict answers every request as planners answer a write to a collection whose delete is
// under way: by the planners' name of the collection.
type deletingPlanners struct{ planners string }

func (c deletingPlanners) RequestMsgWithContext(_ context.Context, m *nats.Msg) (*nats.Msg, error) {
	reply := nats.NewMsg(m.Subject)
	reply.Header.Set(micro.ErrorCodeHeader, "409")
	reply.Data = []byte(`{"error":{"code":"Conflict","message":"job collection ` + c.planners + ` is being deleted: put it again once the delete has ended"}}`)
	return reply, nil
}

// A planners' message names the path's collection as the client does, not by the planners'
// name, which carries a hash of its scope.
func TestAPlannersMessageNamesTheCollectionAsARMDoes(t *testing.T) {
	pname, err := scope{Subscription: "s", ResourceGroup: "rg"}.plannerName("Orders")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{NATS: deletingPlanners{pname}, Subjects: bus.NewSubjects(""), Auth: anyone{}})
	if err != nil {
		t.Fatal(err)
	}
	const base = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/Orders"
	for _, c := range []struct{ path, body string }{
		{base + "?api-version=2016-03-01", `{"location": "West US", "properties": {"sku": {"name": "Standard"}}}`},
		{base + "/jobs/j?api-version=2016-03-01", `{"properties": {"action": {"type": "Http", "request": {"uri": "http://x/", "method": "GET"}}}}`},
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("PUT", c.path, strings.NewReader(c.body)))
		if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "job collection Orders is being deleted") ||
			strings.Contains(rec.Body.String(), pname) {
			t.Errorf("PUT %s: %d %s", c.path, rec.Code, rec.Body)
		}
	}
}
