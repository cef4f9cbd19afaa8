package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// cluster is the system under test: real planner and worker processes built from the
// repository, the Redis and NATS of the run (backends), and the recording target.
type cluster struct {
	t        *testing.T
	dir      string
	bin      string
	back     backends
	nc       *nats.Conn
	target   *target
	planners []*testenv.Proc
	workers  []*testenv.Proc
	timeline timeline
}

// backends are the Redis and NATS a run uses: one redis-server process with its append-only
// file and one JetStream server in the test process (so it can be restarted in place), or
// clusters of either.
type backends struct {
	redisURL string
	natsURL  string // one URL or several, comma-separated
	// plannerURLs, when set, gives planner i its own NATS and Redis URLs (proxies that can cut
	// it off).
	plannerURLs func(i int) (natsURL, redisURL string)
	// workerNATS, when set, gives worker i its own NATS URL.
	workerNATS func(i int) string
	// targetDelay is how long the target takes to answer: long, workers hold deliveries.
	targetDelay time.Duration
	plannerEnv  []string // settings every planner gets besides the run's own
	replicas    int      // of the streams
	connect     func(t testing.TB) *nats.Conn
	redis       *redistest.Server // the single server, for restarts; nil with a cluster
	nats        *natstest.Server  // the single server, for restarts; nil with a cluster
}

// single is one redis-server and one JetStream server.
func single(t *testing.T) backends {
	r := redistest.Start(t, redistest.WithPersistence())
	n := natstest.Start(t)
	return backends{redisURL: r.URL(), natsURL: n.ClientURL(), replicas: 1, connect: n.Connect, redis: r, nats: n}
}

func newCluster(t *testing.T, planners, workers int, back backends) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), bin: testenv.Build(t, "planner", "worker"), back: back}
	c.nc = back.connect(t)
	c.target = startTarget(t, back.targetDelay)
	for i := range planners {
		natsURL, redisURL := back.natsURL, back.redisURL
		if back.plannerURLs != nil {
			natsURL, redisURL = back.plannerURLs(i)
		}
		c.planners = append(c.planners, testenv.Start(t, c.dir, fmt.Sprint("planner-", i), c.bin+"/planner", append([]string{
			"NATS_URL=" + natsURL, "REDIS_URL=" + redisURL, "RESCHED_PLANNER_HTTP_ADDR=127.0.0.1:0",
			"RESCHED_PLANNER_SHUTDOWN_TIMEOUT=5s", fmt.Sprint("RESCHED_PLANNER_STREAM_REPLICAS=", back.replicas)}, back.plannerEnv...)))
		c.timeline.add(time.Now(), up, fmt.Sprint("planner-", i))
	}
	for i := range workers {
		natsURL := back.natsURL
		if back.workerNATS != nil {
			natsURL = back.workerNATS(i)
		}
		c.workers = append(c.workers, testenv.Start(t, c.dir, fmt.Sprint("worker-", i), c.bin+"/worker", []string{
			"NATS_URL=" + natsURL, "RESCHED_WORKER_HTTP_ADDR=127.0.0.1:0", "RESCHED_WORKER_CONCURRENCY=64",
			"RESCHED_WORKER_MIN_RETRY_INTERVAL=1s", "RESCHED_WORKER_SHUTDOWN_TIMEOUT=5s",
			fmt.Sprint("RESCHED_WORKER_STREAM_REPLICAS=", back.replicas)}))
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("RESCHED_CHAOS_LOGS") != "" {
			for _, p := range append(slices.Clone(c.planners), c.workers...) {
				t.Logf("%s (last part):\n%s", p.Name, p.Tail())
			}
		}
	})
	return c
}

// call sends a request to the planners' API and decodes the answer into out.
func (c *cluster) call(subject string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if body == nil {
		b = nil
	}
	msg, err := c.nc.Request("scheduler.api."+subject, b, 10*time.Second)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return fmt.Errorf("%s: error %s: %s", subject, code, msg.Data)
	}
	if out != nil {
		return json.Unmarshal(msg.Data, out)
	}
	return nil
}

// ready waits until a planner answers the API.
func (c *cluster) ready() {
	c.t.Helper()
	testenv.Eventually(c.t, 60*time.Second, "a planner to answer", func() bool {
		return c.call("collections.list", nil, nil) == nil
	})
}

// killPlanner kills planner i with SIGKILL and records when.
func (c *cluster) killPlanner(i int) {
	c.planners[i].Kill(c.t)
	c.timeline.add(time.Now(), down, c.planners[i].Name)
}

// stopPlanner stops planner i as an operator does (SIGTERM): it finishes its batch, lets its
// leases go and leaves.
func (c *cluster) stopPlanner(i int) {
	c.planners[i].Stop(c.t, 15*time.Second)
	c.timeline.add(time.Now(), down, c.planners[i].Name)
}

func (c *cluster) startPlanner(i int) {
	c.timeline.add(time.Now(), up, c.planners[i].Name) // before it runs: a planner is alive from its spawn
	c.planners[i].Restart(c.t)
}

// pausePlanner stops planner i with SIGSTOP: it holds its leases and connections and does
// nothing, until resumePlanner.
func (c *cluster) pausePlanner(i int) {
	c.planners[i].Pause(c.t)
	c.timeline.add(time.Now(), paused, c.planners[i].Name)
}

func (c *cluster) resumePlanner(i int) { c.planners[i].Resume(c.t) }

func (c *cluster) killWorker(i int) {
	c.workers[i].Kill(c.t)
	c.timeline.add(time.Now(), workerKilled, c.workers[i].Name)
}

func (c *cluster) startWorker(i int) { c.workers[i].Restart(c.t) }

func (c *cluster) restartRedis() {
	c.timeline.add(time.Now(), redisRestart, "redis")
	c.back.redis.Restart()
}

func (c *cluster) restartNATS() {
	c.timeline.add(time.Now(), natsRestart, "nats")
	c.back.nats.Restart()
}

// quiet waits until nothing is left in flight: no due occurrence waiting or unacknowledged,
// no result left to apply.
func (c *cluster) quiet(within time.Duration) {
	c.t.Helper()
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.t.Fatal(err)
	}
	calm := 0
	testenv.Eventually(c.t, within, "the planners to dispatch what is due and the due and results streams to drain", func() bool {
		pending := 0
		for _, sc := range [][2]string{{"SCHEDULER_DUE", "workers"}, {"SCHEDULER_RESULTS", "planner-results"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			cons, err := js.Consumer(ctx, sc[0], sc[1])
			if err == nil {
				var info *jetstream.ConsumerInfo
				if info, err = cons.Info(ctx); err == nil {
					pending += int(info.NumPending) + info.NumAckPending
				}
			}
			cancel()
			if err != nil {
				pending++
			}
		}
		// Nothing pending in JetStream is not enough: while the due stream has no leader (a
		// cluster electing after a server rejoined) the planners hold what is due in Redis,
		// and a run was once accounted with 320 occurrences still there, counted as lost.
		var st bus.Status
		if err := c.call("status", nil, &st); err != nil || st.DueNow > 0 {
			pending++
		}
		if pending > 0 {
			calm = 0
			return false
		}
		calm++
		return calm >= 3
	})
}

// target records every delivery it receives and answers 200.
type target struct {
	srv  *http.Server
	addr string

	mu         sync.Mutex
	deliveries []delivery
}

// delivery is one request the target received.
type delivery struct {
	tag, job, expected, requestID string
	at                            time.Time
}

func startTarget(t *testing.T, delay time.Duration) *target {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{addr: l.Addr().String()}
	tg.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := delivery{at: time.Now(), tag: r.Header.Get("x-ms-scheduler-execution-tag"),
			job:       r.Header.Get("x-ms-scheduler-jobcollectionid") + "/" + r.Header.Get("x-ms-scheduler-jobid"),
			expected:  r.Header.Get("x-ms-scheduler-expected-execution-time"),
			requestID: r.Header.Get("x-ms-client-request-id")}
		tg.mu.Lock()
		tg.deliveries = append(tg.deliveries, d)
		tg.mu.Unlock()
		time.Sleep(delay) // a slow target: the worker holds the delivery meanwhile
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = tg.srv.Serve(l) }()
	t.Cleanup(func() { _ = tg.srv.Close() })
	return tg
}

func (tg *target) all() []delivery {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return slices.Clone(tg.deliveries)
}

// timeline records what the harness did, and when.
type timeline struct {
	mu     sync.Mutex
	events []event
}

type eventKind int

const (
	up eventKind = iota
	down
	workerKilled
	redisRestart
	natsRestart
	redisFailover // a Redis master killed: its replica takes over
	natsLoss      // a NATS server of a cluster killed
	paused        // a planner stopped (SIGSTOP) past its leases, then let go on
	linkCut       // a planner cut off from NATS or Redis, the other still in reach
	workerHung    // a worker's link to NATS frozen with deliveries in hand
	leaderless    // the due stream seen without a leader (JetStream electing one)
	led           // the due stream seen with a leader again
)

type event struct {
	at   time.Time
	kind eventKind
	who  string
}

func (tl *timeline) add(at time.Time, kind eventKind, who string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.events = append(tl.events, event{at, kind, who})
}

// plannerAlive reports whether some planner process ran at t.
func (tl *timeline) plannerAlive(t time.Time) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	alive := map[string]bool{}
	for _, e := range tl.events {
		if e.at.After(t) {
			break
		}
		switch e.kind {
		case up:
			alive[e.who] = true
		case down:
			alive[e.who] = false
		}
	}
	for _, a := range alive {
		if a {
			return true
		}
	}
	return false
}

// leaderlessIn is how much of from..to the due stream was seen without a leader.
func (tl *timeline) leaderlessIn(from, to time.Time) time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var total time.Duration
	var since time.Time // zero: led
	overlap := func(a, b time.Time) time.Duration {
		a, b = maxTime(a, from), minTime(b, to)
		return max(b.Sub(a), 0)
	}
	for _, e := range tl.events {
		switch {
		case e.kind == leaderless && since.IsZero():
			since = e.at
		case e.kind == led && !since.IsZero():
			total += overlap(since, e.at)
			since = time.Time{}
		}
	}
	if !since.IsZero() {
		total += overlap(since, to)
	}
	return total
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// near returns the kinds of the events between from and to.
func (tl *timeline) near(from, to time.Time) []eventKind {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []eventKind
	for _, e := range tl.events {
		if !e.at.Before(from) && !e.at.After(to) {
			out = append(out, e.kind)
		}
	}
	return out
}
