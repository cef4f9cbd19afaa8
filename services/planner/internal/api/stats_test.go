package api_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// answers records what the API reports of each answered request.
type answers struct {
	mu  sync.Mutex
	got []string // "endpoint code"
}

func (a *answers) APIRequest(endpoint string, code int, took time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if took <= 0 {
		a.got = append(a.got, endpoint+" took no time")
	}
	a.got = append(a.got, endpoint+" "+strconv.Itoa(code))
}

func (a *answers) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(slices.Values(a.got))
}

// Every answer is recorded with its status, errors included: micro's own statistics time a
// handler until it hands the request to a worker, so they count no error at all.
func TestAnswersAreCountedWithTheirStatus(t *testing.T) {
	rec := &answers{}
	e := newEnv(t, withMetrics(rec))
	e.putCollection(t, "c", `{}`)
	e.fail(t, "jobs.get.c.nope", "", "404", "ResourceNotFound")
	e.fail(t, "jobs.put.c.j", `{"properties": {"action": {"type": "Http"}}}`, "400", "BadRequest")
	e.fail(t, "jobs.get.c.bad!name", "", "400", "BadRequest")

	// Each answer is counted before it is sent: a client that has its answer finds it counted,
	// and the last error is the last answer's (counted after, it could come before another).
	want := []string{"collections-put 200", "jobs-get 400", "jobs-get 404", "jobs-put 400"}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Errorf("answers recorded when the client had them all: %v, want %v", got, want)
	}

	msg, err := e.nc.Request("$SRV.STATS.scheduler", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(msg.Data, &stats); err != nil {
		t.Fatal(err)
	}
	type data struct {
		Answered  int           `json:"num_answered"`
		Errors    int           `json:"num_errors"`
		LastError string        `json:"last_error"`
		Took      time.Duration `json:"processing_time"`
	}
	got := map[string]data{}
	for _, ep := range stats.Endpoints {
		var d data
		if err := json.Unmarshal(ep.Data, &d); err != nil {
			t.Fatalf("endpoint %s: data %s: %v", ep.Name, ep.Data, err)
		}
		got[ep.Name] = d
	}
	if d := got["jobs-get"]; d.Answered != 2 || d.Errors != 2 || !strings.Contains(d.LastError, "bad!name") || d.Took <= 0 {
		t.Errorf("jobs-get data %+v: want 2 answers, 2 errors, the last about the bad name, a time", d)
	}
	if d := got["collections-put"]; d.Answered != 1 || d.Errors != 0 || d.LastError != "" || d.Took <= 0 {
		t.Errorf("collections-put data %+v: want 1 answer, no error, a time", d)
	}
	if d := got["jobs-delete"]; d.Answered != 0 || d.Errors != 0 {
		t.Errorf("jobs-delete data %+v: want nothing", d)
	}
}
