// Package api is the planner's synchronous NATS API (docs/nats-api.md): a
// NATS micro service named "scheduler", discoverable with `nats micro ls`, whose endpoints are
// the request/reply subjects <prefix>.api.collections.* and <prefix>.api.jobs.* and
// <prefix>.api.preview. Every planner registers the same endpoints in one queue group, so any
// number of planners share the requests.
//
// The handlers are thin: they take the names from the request subject, decode the body, call
// package jobs and encode what it answers. Replies:
//
//   - a resource (collection or job, secrets removed) as JSON; a put also sets the header
//     Scheduler-Created to "true" when it created the resource, "false" when it replaced one;
//   - a listing as {"value": [...], "nextLink": {"top": N, "skip": N}}, nextLink absent on the
//     last page; send nextLink back as the request body for the next page;
//   - {} for delete and run;
//   - an error as {"error": {"code", "message", "details": [{"path", "message"}]}} with the
//     micro error headers Nats-Service-Error-Code (the HTTP-like status: "400", "404", "409",
//     "500", "503" from a planner that is stopping) and Nats-Service-Error (the message).
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/recovery"
	"github.com/resched/resched/services/internal/version"
	"github.com/resched/resched/services/planner/internal/jobs"
)

// The service's identity.
const (
	ServiceName = "scheduler"
	// QueueGroup is shared by every planner's endpoints: one of them answers each request.
	QueueGroup = "planners"
	// HeaderCreated on the reply of a put: "true" when the resource was created.
	HeaderCreated = "Scheduler-Created"
)

// requestTimeout bounds one request's work; a client has given up long before.
const requestTimeout = 30 * time.Second

// DefaultConcurrency is how many requests one planner works on at once unless configured:
// one slow request (a listing, Redis slow to answer) does not hold the others back, and a flood
// of requests queues in NATS rather than in the planner's memory.
const DefaultConcurrency = 64

// op is one operation. It returns the value to encode and extra reply headers.
type op func(ctx context.Context, r request) (any, micro.Headers, error)

// request is what an operation gets of a request: the collection (and job) taken from the
// subject, the payload and the headers.
type request struct {
	names   []string
	body    []byte
	headers micro.Headers
}

// endpoint binds an operation to its subject: <prefix>.api.<tokens>, then one wildcard per
// name, the last one ">": a name with a dot in it, which makes the subject longer, reaches the
// endpoint and is refused as a name rather than left without an answer ("no responders").
type endpoint struct {
	name   string   // the micro endpoint name
	tokens []string // the subject after <prefix>.api
	names  []string // what the trailing wildcards are, for error messages
	op     op
}

// route is an endpoint with its subject's fixed part, <prefix>.api.<tokens>.
type route struct {
	endpoint
	fixed string
}

// subject is what the endpoint subscribes to.
func (e route) subject() string {
	if len(e.names) == 0 {
		return e.fixed
	}
	return e.fixed + strings.Repeat(".*", len(e.names)-1) + ".>"
}

// usage is the subject as a client writes it, its names in angle brackets: what `nats micro
// info` shows beside the subscription's wildcards.
func (e route) usage() string {
	u := e.fixed
	for _, n := range e.names {
		u += ".<" + n + ">"
	}
	return u
}

// namesIn reads the names from a request's subject: one token each, the last one the rest.
func (e route) namesIn(subject string) []string {
	rest := strings.TrimPrefix(subject, e.fixed+".")
	names := make([]string, len(e.names))
	for i := range len(names) - 1 {
		names[i], rest, _ = strings.Cut(rest, ".")
	}
	if len(names) > 0 {
		names[len(names)-1] = rest
	}
	return names
}

var (
	collectionName = []string{"collection"}
	jobName        = []string{"collection", "job"}
)

// handlers answer the requests, up to a number at once.
type handlers struct {
	svc      *jobs.Service
	statusOf func(ctx context.Context) (bus.Status, error) // nil: no status endpoint
	log      *slog.Logger
	nc       *nats.Conn  // its max_payload bounds a reply (maxReply)
	work     chan func() // to the workers, one per slot of Concurrency
	inFlight sync.WaitGroup
	// handing is held (shared) while a request is handed to a worker, and taken whole to set
	// stopped: once stopped, no request reaches work, which is then closed.
	handing sync.RWMutex
	stopped bool
	stats   map[string]*endpointStats // by endpoint name, made before the service starts
	metrics Metrics                   // nil: none
}

// maxReply is the most bytes a reply's body may hold: NATS refuses a larger one. It is read
// at each request, since a reconnect may reach a server with another max_payload; a reply's
// headers (micro's, ours) take a few hundred bytes of it.
func (a *handlers) maxReply() int { return int(a.nc.MaxPayload()) - 4<<10 }

// stopWorkers lets the requests in hand finish and ends the workers. The micro service stops
// first, but its subscriptions drain: the requests they had already received still reach the
// handler afterwards, and are refused as unavailable (the client sends them again, to another
// planner).
func (a *handlers) stopWorkers() {
	a.handing.Lock()
	stopped := a.stopped
	a.stopped = true
	a.handing.Unlock()
	if stopped {
		return
	}
	a.inFlight.Wait()
	close(a.work)
}

// Server is the running API.
type Server struct {
	micro.Service
	h *handlers
}

// Stop stops taking requests and returns once those in hand are answered.
func (s *Server) Stop() error {
	err := s.Service.Stop()
	s.h.stopWorkers()
	return err
}

// Options are the API's settings.
type Options struct {
	// Concurrency is how many requests are worked on at once (DefaultConcurrency when 0).
	Concurrency int
	// Status answers <prefix>.api.status (package status); nil: that subject is not served.
	Status func(ctx context.Context) (bus.Status, error)
	// Metrics records every answered request; nil: none.
	Metrics Metrics
}

// New starts the micro service on nc. Stop it with the returned Server's Stop, which lets the
// requests in hand finish.
func New(nc *nats.Conn, svc *jobs.Service, subjects bus.Subjects, logger *slog.Logger, opts ...Options) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	a := &handlers{svc: svc, log: logger, work: make(chan func()), nc: nc, statusOf: o.Status,
		metrics: o.Metrics, stats: map[string]*endpointStats{}}
	for _, e := range a.endpoints() {
		a.stats[e.name] = &endpointStats{}
	}
	for range o.Concurrency {
		go a.worker()
	}
	srv, err := micro.AddService(nc, micro.Config{
		Name:         ServiceName,
		Version:      version.Semver(),
		Description:  "resched planner: job collections, jobs, history and preview",
		Metadata:     map[string]string{"prefix": subjects.Prefix, "version": version.String()},
		QueueGroup:   QueueGroup,
		StatsHandler: a.statsOf,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			logger.Warn("api subscription error", "subject", e.Subject, "error", e.Description)
		},
	})
	if err != nil {
		a.stopWorkers()
		return nil, fmt.Errorf("start api service: %w", err)
	}
	for _, ep := range a.endpoints() {
		e := route{ep, subjects.API(ep.tokens...)}
		if err := srv.AddEndpoint(e.name, a.handler(e), micro.WithEndpointSubject(e.subject()),
			micro.WithEndpointMetadata(map[string]string{"request": e.usage()})); err != nil {
			_ = srv.Stop()
			a.stopWorkers()
			return nil, fmt.Errorf("add api endpoint %s: %w", e.subject(), err)
		}
	}
	return &Server{Service: srv, h: a}, nil
}

func (a *handlers) endpoints() []endpoint {
	var status []endpoint
	if a.statusOf != nil {
		status = append(status, endpoint{"status", []string{"status"}, nil, a.status})
	}
	return append(status, []endpoint{
		{"collections-put", []string{"collections", "put"}, collectionName, a.putCollection},
		{"collections-get", []string{"collections", "get"}, collectionName, a.getCollection},
		{"collections-delete", []string{"collections", "delete"}, collectionName, a.deleteCollection},
		{"collections-list", []string{"collections", "list"}, nil, a.listCollections},
		{"collections-enable", []string{"collections", "enable"}, collectionName, a.enableCollection},
		{"collections-disable", []string{"collections", "disable"}, collectionName, a.disableCollection},
		{"jobs-put", []string{"jobs", "put"}, jobName, a.putJob},
		{"jobs-bulk", []string{"jobs", "bulk"}, collectionName, a.bulkPut},
		{"jobs-patch", []string{"jobs", "patch"}, jobName, a.patchJob},
		{"jobs-get", []string{"jobs", "get"}, jobName, a.getJob},
		{"jobs-delete", []string{"jobs", "delete"}, jobName, a.deleteJob},
		{"jobs-list", []string{"jobs", "list"}, collectionName, a.listJobs},
		{"jobs-run", []string{"jobs", "run"}, jobName, a.runJob},
		{"jobs-history", []string{"jobs", "history"}, jobName, a.history},
		{"jobs-runs", []string{"jobs", "runs"}, jobName, a.runs},
		{"preview", []string{"preview"}, nil, a.preview},
	}...)
}

// status answers the operators' view of the scheduler (package status).
func (a *handlers) status(ctx context.Context, _ request) (any, micro.Headers, error) {
	st, err := a.statusOf(ctx)
	return st, nil, err
}

// handler adapts an operation to micro: the request is handed to an idle worker, waiting for
// one when all are busy (micro hands requests over one at a time per endpoint).
func (a *handlers) handler(e route) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		start := time.Now()
		a.handing.RLock()
		defer a.handing.RUnlock()
		if a.stopped {
			a.answer(e.name, start, req, a.fail(req, errStopping))
			return
		}
		a.inFlight.Add(1)
		a.work <- func() {
			defer a.inFlight.Done()
			a.answer(e.name, start, req, a.serve(e, req))
		}
	})
}

// errStopping answers the requests that arrive while the planner stops.
var errStopping = &jobs.Error{Status: 503, Code: CodeServerBusy, Message: "this planner is stopping; send the request again"}

// worker serves requests until the API stops. The workers live as long as the API rather than
// one goroutine per request: validating a definition needs a deep stack, and a new goroutine
// grew its stack to that depth, copying it each time, for every request (a seventh of the
// planner's CPU at 5,000 puts/s).
func (a *handlers) worker() {
	for serve := range a.work {
		serve()
	}
}

// serve answers one request: names from the subject's last tokens (the wildcards), checked
// before anything else runs.
func (a *handlers) serve(e route, req micro.Request) answer {
	names := e.namesIn(req.Subject())
	for i, n := range names {
		if err := bus.CheckName(e.names[i], n); err != nil {
			return a.fail(req, badRequest(e.names[i], err.Error()))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	// A panic (a bug that this request trips) answers this request alone: it would stop the
	// planner, every request in hand with it, and then each planner the client asks again.
	ans, err := recovery.Call(func() (answer, error) {
		v, h, err := e.op(ctx, request{names: names, body: req.Data(), headers: req.Headers()})
		if err != nil {
			return answer{}, err
		}
		return a.reply(req, v, h), nil
	})
	if p, ok := errors.AsType[*recovery.Panic](err); ok {
		p.Log(a.log, "api request", "subject", req.Subject())
		err = errPanicked
	}
	if err != nil {
		return a.fail(req, err)
	}
	return ans
}

// errPanicked answers a request whose handling panicked.
var errPanicked = &jobs.Error{Status: 500, Code: jobs.CodeInternal, Message: "the planner failed to answer (an internal error; " +
	"its log has the cause, as 'panic recovered: api request')"}
