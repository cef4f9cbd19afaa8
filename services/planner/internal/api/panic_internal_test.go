package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/micro"
)

// panicRequest is a request as micro hands it over; serve reads no more of it.
type panicRequest struct {
	micro.Request
	subject string
}

func (r panicRequest) Data() []byte           { return []byte(`{"secret": "hunter2"}`) }
func (r panicRequest) Headers() micro.Headers { return nil }
func (r panicRequest) Subject() string        { return r.subject }
func (r panicRequest) Reply() string          { return "" }

// A request whose handling panics (a bug it trips) is answered 500, an internal error, with
// the stack in the log and nothing of the request in either; the planner goes on. Unanswered,
// the panic stopped the planner, and a client sending the request again stopped the next one.
func TestARequestThatPanicsIsAnsweredAlone(t *testing.T) {
	var logged bytes.Buffer
	a := &handlers{log: slog.New(slog.NewTextHandler(&logged, nil))}
	calls := 0
	e := route{endpoint{name: "jobs-get", tokens: []string{"jobs", "get"}, names: []string{"collection name", "job name"},
		op: func(context.Context, request) (any, micro.Headers, error) {
			calls++
			var m map[string]int
			m["x"] = calls // a nil map
			return nil, nil, nil
		}}, "scheduler.api.jobs.get"}
	for range 2 {
		ans := a.serve(e, panicRequest{subject: "scheduler.api.jobs.get.c.j"})
		var body errorReply
		if err := json.Unmarshal(ans.data, &body); err != nil || ans.code != 500 || body.Error == nil || body.Error.Code != CodeInternal ||
			ans.header.Get(micro.ErrorCodeHeader) != "500" {
			t.Fatalf("answer %d %s (%v); want 500 with an InternalError", ans.code, ans.data, err)
		}
		if strings.Contains(string(ans.data), "hunter2") || strings.Contains(string(ans.data), "nil map") {
			t.Errorf("the answer says more than an internal error: %s", ans.data)
		}
	}
	out := logged.String()
	for _, want := range []string{"level=ERROR", "panic recovered: api request", "subject=scheduler.api.jobs.get.c.j", "assignment to entry in nil map", "stack="} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the log has the request's body:\n%s", out)
	}
}
