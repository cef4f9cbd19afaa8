package security

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
)

// setup says how one scenario's processes reach NATS and Redis, as environment variables.
type setup struct {
	natsURL string
	planner []string // the planner's NATS credentials
	worker  []string // the worker's
	client  []string // schedctl's
	redis   []string // the planner's Redis URL and files
	keys    []string // the secret keys of planner and worker
}

// scheduler is a planner and a worker started from a setup, and the target their jobs call.
type scheduler struct {
	dir             string
	setup           setup
	planner, worker *service
	target          *target
}

// run starts a planner and a worker and waits until both are ready.
func run(t *testing.T, s setup) *scheduler {
	t.Helper()
	sc := &scheduler{dir: t.TempDir(), setup: s, target: startTarget(t)}
	sc.planner = sc.startPlanner(t, "planner", s.keys...)
	sc.worker = sc.startWorker(t, "worker", s.keys...)
	sc.planner.waitReady(t)
	sc.worker.waitReady(t)
	return sc
}

// runOpen starts a NATS server and a Redis without credentials, and a planner and a worker on
// them.
func runOpen(t *testing.T) (*natstest.Server, *scheduler) {
	t.Helper()
	srv := natstest.Start(t)
	rdb := redistest.Start(t)
	return srv, run(t, setup{natsURL: srv.ClientURL(), redis: []string{"REDIS_URL=" + rdb.URL()}})
}

// startPlanner starts a(nother) planner of the setup with extra settings.
func (sc *scheduler) startPlanner(t *testing.T, name string, extra ...string) *service {
	t.Helper()
	env := append(append([]string{"NATS_URL=" + sc.setup.natsURL}, sc.setup.planner...), sc.setup.redis...)
	return start(t, sc.dir, "planner", name, append(env, extra...)...)
}

// startWorker starts a(nother) worker of the setup with extra settings.
func (sc *scheduler) startWorker(t *testing.T, name string, extra ...string) *service {
	t.Helper()
	env := append([]string{"NATS_URL=" + sc.setup.natsURL}, sc.setup.worker...)
	return start(t, sc.dir, "worker", name, append(env, extra...)...)
}

// ctl runs schedctl as the setup's client and fails the test unless it succeeds.
func (sc *scheduler) ctl(t *testing.T, args ...string) string {
	t.Helper()
	return mustSchedctl(t, append([]string{"NATS_URL=" + sc.setup.natsURL}, sc.setup.client...), args...)
}

// basicJob is a job that calls url every second with Basic authentication.
func basicJob(t *testing.T, url, password string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"properties": map[string]any{
		"action": map[string]any{"type": "Http", "request": map[string]any{"method": "POST", "uri": url,
			"authentication": map[string]any{"type": "Basic", "username": "svc", "password": password}}},
		"recurrence": map[string]any{"frequency": "Second", "interval": 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// basic is the Authorization header of basicJob's credentials.
func basic(password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("svc:"+password))
}

// deliver puts collection c (when new) and job c/j with schedctl, as the setup's client, and
// waits for the target to receive the job with its password.
func (sc *scheduler) deliver(t *testing.T, c, j, password string) {
	t.Helper()
	if out, _, code := schedctl(t, append([]string{"NATS_URL=" + sc.setup.natsURL}, sc.setup.client...), "collection", "get", c); code != 0 {
		sc.ctl(t, "collection", "create", c)
	} else if !strings.Contains(out, c) {
		t.Fatalf("collection get %s: %s", c, out)
	}
	file := writeFile(t, t.TempDir(), j+".json", basicJob(t, sc.target.url("/"+c+"/"+j), password))
	since := time.Now()
	sc.ctl(t, "job", "put", c+"/"+j, "-f", file)
	if got := sc.target.waitDelivery(t, "/"+c+"/"+j, since); got.authorization != basic(password) {
		t.Fatalf("the target got Authorization %q, want the job's Basic credentials", got.authorization)
	}
}
