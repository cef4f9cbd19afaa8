package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/internal/health"
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/services/internal/redisconn"
	"github.com/resched/resched/services/internal/version"
	"github.com/resched/resched/services/planner/internal/api"
	"github.com/resched/resched/services/planner/internal/dispatch"
	"github.com/resched/resched/services/planner/internal/intake"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/lease"
	"github.com/resched/resched/services/planner/internal/metrics"
	"github.com/resched/resched/services/planner/internal/results"
	"github.com/resched/resched/services/planner/internal/status"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/jobschema"
)

// backlogInterval is how often the due backlog gauge is sampled.
const backlogInterval = 5 * time.Second

// finishStaleEvery is how often a planner looks for the collections' state changes and deletes,
// and the deleted jobs' purges, that a planner left unfinished (jobs.Service.FinishStale).
const finishStaleEvery = 5 * time.Second

// replicasInterval is how often each Redis master's replicas in sync are counted for the
// metric, on a Redis Cluster or Sentinel.
const replicasInterval = 5 * time.Second

// planner is the running process: its connections and the parts built on them.
type planner struct {
	cfg      Config
	log      *slog.Logger
	subjects bus.Subjects

	conn     *natsconn.Conn
	nc       *nats.Conn // conn's client
	js       jetstream.JetStream
	rdb      redis.UniversalClient
	store    *store.Store
	metrics  *metrics.Planner
	http     *health.Server
	embedded *server.Server               // the embedded NATS server, when configured
	started  atomic.Bool                  // every part runs: readiness
	leases   atomic.Pointer[lease.Leases] // set at start, read by the readiness check
	intake   atomic.Bool                  // the intake consumer is set up: readiness
	results  atomic.Bool                  // the results consumer is set up: readiness
	id       string                       // this planner among the live ones
	began    time.Time                    // when this process started (the leases' outage detection)
}

// newPlanner connects to NATS and Redis (neither need be up yet) and binds the HTTP address.
func newPlanner(cfg Config, logger *slog.Logger) (*planner, error) {
	p := &planner{cfg: cfg, log: logger, subjects: bus.NewSubjects(cfg.SubjectPrefix), id: plannerID(), began: time.Now()}
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register runtime metrics: %w", err)
		}
	}
	var err error
	if p.metrics, err = metrics.New(reg); err != nil {
		return nil, err
	}
	if p.rdb, err = cfg.Redis.Client("resched-planner", logger); err != nil {
		return nil, err
	}
	p.store = store.New(p.rdb, cfg.RedisKeyPrefix, store.WithPartitions(cfg.Partitions), store.WithResultMemory(cfg.DuplicateWindow),
		store.WithHistory(cfg.HistoryEntries, cfg.HistoryAge, cfg.HistoryMessage), store.WithMinReplicas(cfg.minReplicas(), cfg.ReplicaWait), store.WithReplicaChanges(replicaChanges(logger)))
	if cfg.EmbeddedNATS != "" {
		if p.embedded, err = startEmbeddedNATS(cfg.EmbeddedNATS, cfg.EmbeddedNATSDir, logger); err != nil {
			_ = p.rdb.Close()
			return nil, err
		}
		cfg.NATS.URL = p.embedded.ClientURL()
	}
	// Named with the planner's id, as `schedctl cluster status` lists it: a NATS server's
	// connection report then says which planner is where.
	if p.conn, err = natsconn.Connect(cfg.NATS, "resched-planner "+p.id, logger); err != nil {
		p.close()
		return nil, err
	}
	p.nc = p.conn.Conn
	if p.js, err = cfg.NATS.JetStream(p.nc, dispatch.JetStreamOptions(cfg.Concurrency, cfg.Batch)...); err != nil {
		p.close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p.http, err = health.Listen(cfg.HTTPAddr, health.Handler(health.Config{Gatherer: reg, Logger: logger, Version: version.String(), Profiling: cfg.Profiling,
		Live: []health.Check{{Name: "nats", Func: p.conn.Live}, {Name: "redis credentials", Func: redisconn.NewAuthWatch(p.store.Ping, 0, nil).Live}}, Ready: []health.Check{
			{Name: "startup", Func: p.startedCheck},
			{Name: "leases", Func: p.leasesCheck},
			{Name: "nats", Func: p.conn.Ready},
			{Name: "due stream", Func: p.dueStreamReady},
			{Name: "consumers", Func: p.consumersCheck},
			{Name: "redis", Func: p.store.Ping},
		}}))
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// consumersCheck says which of the planner's own consumers is not set up: its intake applies
// no definition, or its results no result, until it is. A set-up JetStream refuses for good (a
// NATS user without the permission) is retried, and shows here and in the log.
func (p *planner) consumersCheck(context.Context) error {
	var down []string
	if !p.intake.Load() {
		down = append(down, "intake")
	}
	if !p.results.Load() {
		down = append(down, "results")
	}
	if len(down) > 0 {
		return fmt.Errorf("the %s consumer is not set up (the log says why)", strings.Join(down, " and "))
	}
	return nil
}

func (p *planner) startedCheck(context.Context) error {
	if !p.started.Load() {
		return errors.New("starting or stopping")
	}
	return nil
}

// dueStreamReady asks the due stream's leader for its state: with no leader (a JetStream
// cluster that lost its quorum) no occurrence can be published, and the planner is not ready.
func (p *planner) dueStreamReady(ctx context.Context) error {
	if !p.nc.IsConnected() {
		// Asked now, the question would wait out the check's time-out in the reconnect buffer.
		return errors.New("NATS not connected")
	}
	st, err := p.js.Stream(ctx, p.subjects.DueStream())
	if err != nil {
		return fmt.Errorf("stream %s: %w", p.subjects.DueStream(), err)
	}
	if info := st.CachedInfo(); info.Cluster != nil && info.Cluster.Leader == "" {
		return fmt.Errorf("stream %s has no leader", p.subjects.DueStream())
	}
	return nil
}

func (p *planner) leasesCheck(context.Context) error {
	l := p.leases.Load()
	if l == nil || !l.Ready() {
		return errors.New("no heartbeat recorded in Redis yet")
	}
	if off, skewed := l.ClockOffset(); skewed {
		way := "behind"
		if off < 0 {
			way = "ahead of"
		}
		return fmt.Errorf("this planner's clock is %v %s Redis's, more than %s: it dispatches nothing",
			off.Abs().Round(time.Millisecond), way, config.FormatDuration(p.cfg.MaxClockOffset))
	}
	return nil
}

// plannerID names this planner among the live ones: its host, its process and a random part,
// so a restarted process is a new planner.
func plannerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// close releases the connections at once, for a start that failed half way.
func (p *planner) close() {
	if p.conn != nil {
		p.conn.Close()
	}
	_ = p.rdb.Close()
	p.stopEmbedded()
}

// stopEmbedded stops the embedded NATS server, last: the planner's own connection drains first.
func (p *planner) stopEmbedded() {
	if p.embedded != nil {
		p.embedded.Shutdown()
		p.embedded.WaitForShutdown()
	}
}

// run serves until ctx ends or a part fails, then stops everything within ShutdownTimeout. It
// returns nil after a stop asked for through ctx.
func (p *planner) run(ctx context.Context) error {
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	httpDone := make(chan error, 1)
	go func() { httpDone <- p.http.Serve() }()
	p.log.Info("http listening", "addr", p.http.Addr().String())

	var parts sync.WaitGroup
	apiSrv, err := p.start(runCtx, &parts, fail)
	if err != nil {
		fail(err)
	} else {
		p.started.Store(true)
		p.log.Info("planner ready")
	}
	select {
	case <-runCtx.Done():
	case err := <-httpDone:
		fail(fmt.Errorf("http server stopped: %w", err))
	case <-p.conn.Closed():
		// Closed for good (credentials refused): the planner can do nothing more; it exits so
		// that whatever runs it starts it again, with its credentials as they are now.
		fail(fmt.Errorf("the NATS connection is closed for good: %w", p.conn.Err()))
	}
	p.started.Store(false)
	p.log.Info("planner stopping", "reason", context.Cause(runCtx).Error())
	stopErr := p.stop(apiSrv, &parts)

	if cause := context.Cause(runCtx); ctx.Err() == nil || !errors.Is(cause, context.Cause(ctx)) {
		return errors.Join(cause, stopErr)
	}
	return stopErr
}

// replicaChanges logs a Redis master's replicas in sync found gone or back
// (RESCHED_PLANNER_MIN_REPLICAS=auto): while a master has none, its writes wait for none, and
// a failover of it could lose them.
func replicaChanges(logger *slog.Logger) func(master string, inSync int) {
	return func(master string, inSync int) {
		master = cmp.Or(master, "the master REDIS_URL names")
		if inSync == 0 {
			logger.Warn("Redis master has no replica in sync: its writes no longer wait for one, and a failover now could lose them",
				"master", master)
			return
		}
		logger.Info("Redis master has a replica in sync again: its writes wait for it", "master", master, "replicas", inSync)
	}
}

// lookAtRedis checks what the planner needs of Redis's settings, looks that are not worth
// holding the start: it warns when Redis may evict keys or keeps no append-only file (the
// planner runs all the same, as it would on a Redis that someone sets so later, but the
// operator learns it before a job is lost), and lets the heartbeat, the leases and the
// dispatcher run while Redis is at its maxmemory, which needs Redis 7's script flags
// (store.UseScriptFlags), saying what an older one costs.
func (p *planner) lookAtRedis(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	evicting, err := p.store.Evicting(ctx)
	switch {
	case err != nil:
		p.log.Info("could not tell whether Redis may evict keys", "error", err)
	case len(evicting) > 0:
		p.log.Warn(store.EvictingRisk, "servers", evicting)
	}
	unlogged, err := p.store.Unlogged(ctx)
	switch {
	case err != nil:
		p.log.Info("could not tell whether Redis keeps an append-only file", "error", err)
	case len(unlogged) > 0:
		p.log.Warn(store.UnloggedRisk, "servers", unlogged)
	}
	used, err := p.store.UseScriptFlags(ctx)
	switch {
	case err != nil:
		p.log.Info("could not ask Redis whether it takes script flags: the jobs stop firing while Redis is at its maxmemory", "error", err)
	case !used:
		p.log.Warn("Redis does not take script flags (before 7.0): the jobs stop firing while Redis is at its maxmemory (docs/operations.md, Redis)")
	}
}

// start ensures the streams and the data layout, then starts the leases, the API, the
// intake, the dispatcher, the results consumer and the backlog sampler. A part that fails
// later calls fail.
func (p *planner) start(ctx context.Context, parts *sync.WaitGroup, fail context.CancelCauseFunc) (micro.Service, error) {
	streams := bus.StreamOptions{Replicas: p.cfg.StreamReplicas, DuplicateWindow: p.cfg.DuplicateWindow,
		PlacementTags: bus.SplitTags(p.cfg.PlacementTags)}
	if err := retry(ctx, "ensure streams", p.log, func(ctx context.Context) error {
		notes, err := bus.EnsureStreams(ctx, p.js, p.subjects, streams)
		for _, n := range notes {
			msg := "stream left as it is: its setting is not what the planners would set"
			if n.Changed {
				msg = "stream setting changed: it would have lost messages"
			}
			p.log.Warn(msg, "stream", n.Stream, "setting", n.Setting, "stream_has", n.Has, "planner_setting", n.Wants)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := retry(ctx, "check the data layout", p.log, p.store.CheckLayout); err != nil {
		return nil, err
	}
	p.lookAtRedis(ctx)
	p.metrics.Partitions(p.store.Partitions())
	validator, err := jobschema.New(jobschema.WithMinRetryInterval(p.cfg.MinRetryInterval))
	if err != nil {
		return nil, err
	}
	var disp *dispatch.Dispatcher
	leases := lease.New(lease.Config{Store: p.store, ID: p.id, TTL: p.cfg.Lease, Start: p.began, Logger: p.log,
		Metrics: p.metrics, Acquired: func(part int) { disp.Wake(part) }, Publishing: p.nc.IsConnected,
		MaxClockOffset: p.cfg.MaxClockOffset})
	p.leases.Store(leases)
	disp = dispatch.New(dispatch.Config{
		Store: p.store, JS: p.js, Events: p.nc, Leases: leases, Subjects: p.subjects, Logger: p.log, Metrics: p.metrics,
		Batch: p.cfg.Batch, CatchUp: p.cfg.CatchUpWindow, CatchUpPolicy: p.cfg.CatchUpPolicy, CatchUpRate: p.cfg.CatchUpRate,
		MaxIdle: p.cfg.MaxIdle, WakeLinger: p.cfg.WakeLinger, Concurrency: p.cfg.Concurrency, Lookahead: p.cfg.Lookahead,
		CallTimeout: leases.Period(),
	})
	wakes, err := p.nc.Subscribe(p.subjects.Wake("*"), onWake(disp))
	if err != nil {
		return nil, fmt.Errorf("subscribe to wake-ups: %w", err)
	}
	svc := jobs.New(jobs.Config{Store: p.store, Validator: validator, Events: p.nc, Runner: disp, Purger: &duePurger{js: p.js, stream: p.subjects.DueStream(), counted: p.metrics},
		Waker: natsWaker{nc: p.nc, subjects: p.subjects, local: disp, held: leases.Holds}, WakeWithin: p.cfg.MaxIdle + p.cfg.Lookahead, Subjects: p.subjects, Keys: p.cfg.keys, Logger: p.log})
	state := &status.Source{Store: p.store, JS: p.js, Subjects: p.subjects, ID: p.id, Clock: time.Now, Settings: p.cfg.warnings()}
	apiSrv, err := api.New(p.nc, svc, p.subjects, p.log, api.Options{Concurrency: p.cfg.APIConcurrency, Status: state.Status, Metrics: p.metrics})
	if err != nil {
		_ = wakes.Unsubscribe()
		return nil, err
	}
	// A stream found missing later (a NATS server that lost its store) is made again as at start.
	makeStreams := func(ctx context.Context) error {
		_, err := bus.EnsureStreams(ctx, p.js, p.subjects, streams)
		return err
	}
	in := intake.New(intake.Config{JS: p.js, Jobs: svc, Subjects: p.subjects, Logger: p.log, Events: p.nc, Erase: p.cfg.keys != nil,
		Consuming: &p.intake, MakeStreams: makeStreams})
	res := results.New(results.Config{JS: p.js, Store: p.store, Events: p.nc, Subjects: p.subjects,
		Logger: p.log, Metrics: p.metrics, Consuming: &p.results, MakeStreams: makeStreams})
	for name, run := range map[string]func(context.Context) error{
		"leases": leases.Run, "dispatch": disp.Run, "intake": in.Run, "results": res.Run,
	} {
		parts.Go(func() {
			if err := run(ctx); err != nil {
				fail(fmt.Errorf("%s: %w", name, err))
			}
		})
	}
	parts.Go(func() { p.metrics.SampleDueBacklog(ctx, backlogInterval, p.store.DueBacklog, p.log) })
	parts.Go(func() { finishStale(ctx, svc, p.log) })
	if p.cfg.Redis.FailsOver() {
		// Where a failover can happen, a master left without a replica is what loses writes in
		// one: a gauge an alert reads, and the log line, even while nothing is written to it.
		parts.Go(func() { p.metrics.SampleReplicas(ctx, replicasInterval, p.store.ReplicasInSync, p.log) })
	}
	// A server cut off from the rest of its cluster is left for another: the planner keeps its
	// leases meanwhile, and would publish nothing until the cut healed.
	parts.Go(func() { p.conn.WatchJetStream(ctx, natsconn.StreamLed(p.js, p.subjects.DueStream()), p.log) })
	return apiSrv, nil
}

// finishStale finishes, every finishStaleEvery until ctx ends, the collections' changes a
// planner left unfinished.
func finishStale(ctx context.Context, svc *jobs.Service, logger *slog.Logger) {
	t := time.NewTicker(finishStaleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := svc.FinishStale(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
		case store.Unavailable(err):
			logger.Info("could not look for collections' changes and jobs' purges left unfinished: Redis does not answer", "error", err)
		default:
			logger.Warn("could not finish a collection's change or a job's purge left unfinished", "error", err)
		}
	}
}

// duePurger removes the messages of subjects of the due stream (jobs.Purger), one at a time. A
// purge by subject would be one request, but with nats-server 2.15 it lost a retry another
// job had waiting in the workers' consumer: never redelivered, its error action never run
// (seen twice of two with make run; a message deleted alone is dropped from the consumer
// alone).
type duePurger struct {
	js      jetstream.JetStream
	stream  string
	counted purgeCounter // nil: not counted

	mu sync.Mutex
	st jetstream.Stream // looked up once (a request): its calls name the stream, one made again included
}

// dueStream is the due stream's handle.
func (p *duePurger) dueStream(ctx context.Context) (jetstream.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st == nil {
		st, err := p.js.Stream(ctx, p.stream)
		if err != nil {
			return nil, fmt.Errorf("due stream %s: %w", p.stream, err)
		}
		p.st = st
	}
	return p.st, nil
}

// purgeCounter counts the messages a purge removed (metrics.Planner).
type purgeCounter interface {
	Purged(n int)
}

// removed counts one message removed.
func (p *duePurger) removed() {
	if p.counted != nil {
		p.counted.Purged(1)
	}
}

// maxPurged bounds the messages removed for one subject: a job has a few (an occurrence, its
// retry, its error action); a collection's subjects are each bounded alike.
const maxPurged = 1000

func (p *duePurger) PurgeDue(ctx context.Context, subject string) error {
	st, err := p.dueStream(ctx)
	if err != nil {
		return err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return fmt.Errorf("due stream %s: %w", p.stream, err)
	}
	for subj := range info.State.Subjects {
		for range maxPurged {
			m, err := st.GetLastMsgForSubject(ctx, subj)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return fmt.Errorf("due stream %s, %s: %w", p.stream, subj, err)
			}
			if err := st.DeleteMsg(ctx, m.Sequence); err == nil {
				p.removed()
			} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("due stream %s, %s: %w", p.stream, subj, err)
			}
		}
	}
	return nil
}

// PurgeIncarnation removes the messages of subject (a job's) of one incarnation of the job,
// oldest first, leaving those of a job put again under its name after the delete. Those that
// carry none (published by an earlier release, or by another client) go too: a job put again
// has one.
func (p *duePurger) PurgeIncarnation(ctx context.Context, subject string, incarnation int64) error {
	st, err := p.dueStream(ctx)
	if err != nil {
		return err
	}
	seq := uint64(1)
	for range maxPurged {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("due stream %s, %s: %w", p.stream, subject, err)
		}
		seq = m.Sequence + 1
		// One that does not read as an occurrence is no job's to keep: no worker runs it.
		if d, err := bus.DecodeDue(m.Data); err == nil && d.Incarnation != incarnation && d.Incarnation != 0 {
			continue
		}
		if err := st.DeleteMsg(ctx, m.Sequence); err == nil {
			p.removed()
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("due stream %s, %s: %w", p.stream, subject, err)
		}
	}
	return nil
}

// stop takes the planner down in order: no new API requests; the intake, results and the
// dispatcher finish what they hold (their context has ended); NATS drains its subscriptions
// and flushes what was published; then HTTP and Redis close. Past ShutdownTimeout it gives up
// waiting and closes everything.
func (p *planner) stop(apiSrv micro.Service, parts *sync.WaitGroup) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if apiSrv != nil {
		if err := apiSrv.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop api: %w", err))
		}
	}
	partsDone := make(chan struct{})
	go func() { parts.Wait(); close(partsDone) }()
	select {
	case <-partsDone:
		if l := p.leases.Load(); l != nil {
			l.Leave(ctx) // the other planners take this one's partitions over at once
		}
	case <-ctx.Done():
		errs = append(errs, errors.New("shutdown timed out waiting for the dispatcher, intake and results to finish"))
	}
	// Drain closes a connection that is not connected at once, and says so; that is no error here.
	if err := p.conn.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrConnectionReconnecting) {
		errs = append(errs, fmt.Errorf("drain nats: %w", err))
	}
	select {
	case <-p.conn.Closed():
	case <-ctx.Done():
		errs = append(errs, errors.New("shutdown timed out draining nats"))
		p.conn.Close()
	}
	if err := p.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop http: %w", err))
	}
	if err := p.rdb.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close redis: %w", err))
	}
	p.stopEmbedded()
	return errors.Join(errs...)
}
