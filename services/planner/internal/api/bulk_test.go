package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/planner/internal/api"
)

func TestBulkPutAnswersForEachJob(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.old", hourly, nil)
	item := func(name, props string) string { return fmt.Sprintf(`{"name": %q, "properties": %s}`, name, props) }
	body := `{"jobs": [` + strings.Join([]string{
		item("new", hourly),
		item("c/old", hourly),   // replaced; the Azure form of a name
		item("other/x", hourly), // another collection's
		item("bad", `{"action": {"type": "Http", "request": {"uri": "http://x/", "method": "GET"}}, "recurrence": {"frequency": "Fortnight"}}`),
		item("bad name", hourly), // not a job name
	}, ",") + `]}`
	var reply struct{ Value []json.RawMessage }
	e.ok(t, "jobs.bulk.c", body, &reply)
	want := []struct {
		status int
		path   string
	}{{201, ""}, {200, ""}, {400, "jobs[2].name"}, {400, "recurrence.frequency"}, {400, ""}}
	if len(reply.Value) != len(want) {
		t.Fatalf("%d results: %s", len(reply.Value), reply.Value)
	}
	for i, raw := range reply.Value {
		var r struct {
			Name   string `json:"name"`
			Status int    `json:"status"`
			Error  *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Details []struct{ Path string }
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Status != want[i].status {
			t.Errorf("job %d (%s): status %d, want %d: %s", i, r.Name, r.Status, want[i].status, raw)
		}
		if want[i].path != "" && (r.Error == nil || len(r.Error.Details) == 0 || r.Error.Details[0].Path != want[i].path) {
			t.Errorf("job %d: error %s, want one about %s", i, raw, want[i].path)
		}
		if strings.Contains(string(raw), secret) {
			t.Errorf("a result quotes the secret: %s", raw)
		}
	}
	var got struct{ Value []struct{ Name string } }
	e.ok(t, "jobs.list.c", ``, &got)
	if len(got.Value) != 2 {
		t.Errorf("stored %v, want old and new", got.Value)
	}
	// create-only: an existing job is a Conflict, the others are created.
	req := nats.NewMsg("scheduler.api.jobs.bulk.c")
	req.Data = []byte(`{"jobs": [` + item("new", hourly) + `,` + item("newer", hourly) + `]}`)
	req.Header.Set(api.HeaderIfNoneMatch, "*")
	msg, err := e.nc.RequestMsg(req, 5*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), `{"name":"new","status":409`) || !strings.Contains(string(msg.Data), `{"name":"newer","status":201}`) {
		t.Fatalf("create-only bulk: %v %s", err, msg.Data)
	}
	e.fail(t, "jobs.bulk.c", `{"jobs": 5}`, "400", "BadRequest")
}

// A bulk request whose checks take half its time stores what it checked and answers each job
// left 503 ServerBusy, "not checked nor stored", to be sent again; none of them is stored.
func TestBulkPutAnswersTheJobsLeftUncheckedBusy(t *testing.T) {
	start := time.Now()
	var looks atomic.Int64
	e := newEnv(t, withWall(func() time.Time { // each look at the time finds 20 s more gone
		return start.Add(time.Duration(looks.Add(1)-1) * 20 * time.Second)
	}))
	e.putCollection(t, "c", `{}`)
	body := fmt.Sprintf(`{"jobs": [{"name": "a", "properties": %s}, {"name": "b", "properties": %s}, {"name": "x", "properties": {"not": "a job"}}]}`, hourly, hourly)
	var reply struct {
		Value []struct {
			Name   string
			Status int
			Error  *struct{ Code, Message string }
		}
	}
	looks.Store(0)
	e.ok(t, "jobs.bulk.c", body, &reply)
	if len(reply.Value) != 3 || reply.Value[0].Status != 201 {
		t.Fatalf("answer %+v; want a created", reply.Value)
	}
	for _, r := range reply.Value[1:] {
		if r.Status != 503 || r.Error == nil || r.Error.Code != "ServerBusy" || !strings.Contains(r.Error.Message, "not checked nor stored") {
			t.Errorf("%s: %d %+v; want 503 ServerBusy, not checked nor stored", r.Name, r.Status, r.Error)
		}
	}
	var got struct{ Value []struct{ Name string } }
	e.ok(t, "jobs.list.c", ``, &got)
	if len(got.Value) != 1 {
		t.Errorf("%d jobs stored, want a alone", len(got.Value))
	}
}
