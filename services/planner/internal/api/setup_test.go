package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/planner/internal/api"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/jobschema"
)

// t0 is the planners' clock in these tests.
var t0 = time.Date(2024, 1, 1, 11, 0, 0, 0, time.UTC)

// hourly is a job with a secret (the Basic password) that first runs the day after t0.
const hourly = `{"startTime": "2024-01-02T00:00:00Z",
  "action": {"type": "Https", "request": {"uri": "https://example.com/hook", "method": "POST",
    "authentication": {"type": "Basic", "username": "u", "password": "s3cret-pass"}}},
  "recurrence": {"frequency": "Hour", "interval": 1}}`

const secret = "s3cret-pass"

// env is a planner's API on real NATS and Redis, with a client connection.
type env struct {
	clock   atomic.Int64 // the planners' clock, unix nanoseconds; t0 unless a test moves it
	nats    *natstest.Server
	redis   *redistest.Server
	nc      *nats.Conn // the client's connection
	conn    *nats.Conn // the planner's connection (api's)
	store   *store.Store
	svc     *jobs.Service
	runner  *fakeRunner
	purger  *purgeRecorder
	api     micro.Service
	metrics api.Metrics // given to every API started; nil: none
}

// setup is what a test changes in an env: the Redis client's options, the planner's keys.
type setup struct {
	redis   redis.Options
	keys    *secrets.Keyring
	store   []store.Option
	metrics api.Metrics
	wall    func() time.Time
}

// withMetrics gives the API a recorder of the requests it answers.
func withMetrics(m api.Metrics) func(*setup) { return func(s *setup) { s.metrics = m } }

// withStore gives the planner's store options.
func withStore(o ...store.Option) func(*setup) { return func(s *setup) { s.store = o } }

// withWall gives the service the real time it reads a request's deadline against.
func withWall(w func() time.Time) func(*setup) { return func(s *setup) { s.wall = w } }

// withKeys gives the planner a keyring that seals the secrets it stores.
func withKeys(k *secrets.Keyring) func(*setup) { return func(s *setup) { s.keys = k } }

// newEnv starts NATS, Redis, the service and its API.
func newEnv(t testing.TB, opts ...func(*setup)) *env {
	t.Helper()
	e := &env{nats: natstest.Start(t), redis: redistest.Start(t), runner: &fakeRunner{}, purger: &purgeRecorder{}}
	cfg := setup{redis: redis.Options{Addr: e.redis.Addr}}
	for _, o := range opts {
		o(&cfg)
	}
	e.metrics = cfg.metrics
	ro := &cfg.redis
	rdb := redis.NewClient(ro)
	t.Cleanup(func() { _ = rdb.Close() })
	e.store = store.New(rdb, "test", cfg.store...)
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	conn := e.nats.Connect(t)
	e.conn = conn
	e.clock.Store(t0.UnixNano())
	e.svc = jobs.New(jobs.Config{Store: e.store, Validator: v, Events: conn, Runner: e.runner, Purger: e.purger, Keys: cfg.keys,
		Subjects: bus.NewSubjects(""), Clock: func() time.Time { return time.Unix(0, e.clock.Load()).UTC() }, Wall: cfg.wall})
	e.api = e.start(t, conn)
	e.nc = e.nats.Connect(t)
	return e
}

// start runs an API (a planner) on conn.
func (e *env) start(t testing.TB, conn *nats.Conn) micro.Service {
	t.Helper()
	srv, err := api.New(conn, e.svc, bus.NewSubjects(""), slog.New(slog.NewTextHandler(t.Output(), nil)),
		api.Options{Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := conn.Flush(); err != nil { // the server knows the subscriptions before any request
		t.Fatal(err)
	}
	return srv
}

// call sends a request on scheduler.api.<subject>.
func (e *env) call(t testing.TB, subject, body string) *nats.Msg {
	t.Helper()
	msg, err := e.nc.Request("scheduler.api."+subject, []byte(body), 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

// ok sends a request that must succeed and decodes its answer into out (when not nil).
func (e *env) ok(t testing.TB, subject, body string, out any) *nats.Msg {
	t.Helper()
	msg := e.call(t, subject, body)
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("%s: error %s: %s", subject, code, msg.Data)
	}
	if out != nil {
		if err := json.Unmarshal(msg.Data, out); err != nil {
			t.Fatalf("%s: decode %s: %v", subject, msg.Data, err)
		}
	}
	return msg
}

// apiError is the body of an error reply.
type apiError struct {
	Error struct {
		Code    string           `json:"code"`
		Message string           `json:"message"`
		Details []bus.ErrorEntry `json:"details"`
	} `json:"error"`
}

func (a apiError) paths() []string {
	var out []string
	for _, d := range a.Error.Details {
		out = append(out, d.Path)
	}
	return out
}

// fail sends a request that must fail with status and code, and returns the error body.
func (e *env) fail(t *testing.T, subject, body string, status, code string) apiError {
	t.Helper()
	msg := e.call(t, subject, body)
	if got := msg.Header.Get(micro.ErrorCodeHeader); got != status {
		t.Fatalf("%s: status header %q, want %q (body %s)", subject, got, status, msg.Data)
	}
	var a apiError
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		t.Fatalf("%s: decode error %s: %v", subject, msg.Data, err)
	}
	if a.Error.Code != code || a.Error.Message == "" {
		t.Fatalf("%s: error %s, want code %s and a message", subject, msg.Data, code)
	}
	if got := msg.Header.Get(micro.ErrorHeader); got == "" || strings.Contains(got, "\n") {
		t.Fatalf("%s: description header %q: want the message on one line", subject, got)
	}
	return a
}

// putCollection creates a collection with the given properties JSON.
func (e *env) putCollection(t testing.TB, name, props string) {
	t.Helper()
	e.ok(t, "collections.put."+name, `{"properties": `+props+`}`, nil)
}

// page is a listing's answer.
type page[T any] struct {
	Value    []T               `json:"value"`
	NextLink *jobs.PageRequest `json:"nextLink"`
	Count    *int              `json:"count"`
}

// purgeRecorder records the due stream subjects purged, as the planner's purger would remove
// their messages: a collection's subjects, a job's subject followed by "@" and its incarnation.
type purgeRecorder struct {
	mu       sync.Mutex
	subjects []string
	fail     error // answered instead while set, as a NATS server that does not answer
	// While together is set, each purge waits, 5 s at most, until that many are under way at
	// once (met closes then); apart counts those that waited in vain.
	together, under, apart int
	met                    chan struct{}
}

func (p *purgeRecorder) PurgeDue(_ context.Context, subject string) error {
	p.meet()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.subjects = append(p.subjects, subject)
	return nil
}

// meet waits for the purges made with this one (together).
func (p *purgeRecorder) meet() {
	p.mu.Lock()
	if p.together == 0 {
		p.mu.Unlock()
		return
	}
	if p.under++; p.under == p.together {
		close(p.met)
	}
	met := p.met
	p.mu.Unlock()
	select {
	case <-met:
	case <-time.After(5 * time.Second):
		p.mu.Lock()
		p.apart++
		p.mu.Unlock()
	}
}

// meetIn makes the next n purges wait for each other; it answers how many waited in vain.
func (p *purgeRecorder) meetIn(n int) (apart func() int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.together, p.under, p.apart, p.met = n, 0, 0, make(chan struct{})
	return func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.apart
	}
}

func (p *purgeRecorder) PurgeIncarnation(ctx context.Context, subject string, incarnation int64) error {
	return p.PurgeDue(ctx, subject+"@"+strconv.FormatInt(incarnation, 10))
}

func (p *purgeRecorder) failWith(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = err
}

func (p *purgeRecorder) purged() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.subjects)
}

// fakeRunner records the jobs run now.
type fakeRunner struct {
	mu    sync.Mutex
	calls []string
}

func (r *fakeRunner) RunNow(_ context.Context, c, j string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c+"/"+j)
	return nil
}

func (r *fakeRunner) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}
