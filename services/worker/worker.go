package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/health"
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/services/internal/version"
	"github.com/resched/resched/services/worker/internal/consumer"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/services/worker/internal/metrics"
)

// drainTimeout bounds the NATS drain and the HTTP shutdown after the deliveries have stopped.
const drainTimeout = 10 * time.Second

// worker is the running process: its connections and the parts built on them.
type worker struct {
	cfg      Config
	log      *slog.Logger
	conn     *natsconn.Conn
	js       jetstream.JetStream
	consumer *consumer.Consumer
	closeDel func(context.Context) // releases the deliverers' connections
	http     *health.Server
}

// newWorker builds the parts, connects to NATS (which need not be up yet) and binds the HTTP
// address, so a port in use fails the start at once.
func newWorker(cfg Config, logger *slog.Logger) (*worker, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register runtime metrics: %w", err)
		}
	}
	m, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	registry, closeDel, err := deliverers(cfg, logger)
	if err != nil {
		return nil, err
	}
	w := &worker{cfg: cfg, log: logger, closeDel: closeDel}
	if w.conn, err = natsconn.Connect(cfg.NATS, "resched-worker", logger); err != nil {
		w.closeDel(context.Background())
		return nil, err
	}
	if w.js, err = cfg.NATS.JetStream(w.conn.Conn); err != nil {
		w.close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	w.consumer = consumer.New(consumer.Config{
		JS: w.js, Subjects: bus.NewSubjects(cfg.SubjectPrefix), Logger: logger, Metrics: m,
		Executor: executor.New(executor.Config{
			Deliverer: registry, Secrets: cfg.keys, MinRetryInterval: cfg.MinRetryInterval, Timeout: cfg.AttemptTimeout, Region: cfg.Region,
			Logger: logger,
		}),
		Concurrency: cfg.Concurrency, CollectionConcurrency: cfg.CollectionLimit, AckWait: cfg.AckWait, MaxAckPending: cfg.MaxAckPending,
		Streams:     bus.StreamOptions{Replicas: cfg.StreamReplicas, PlacementTags: bus.SplitTags(cfg.PlacementTags)},
		StopTimeout: cfg.ShutdownTimeout, ResultLinger: cfg.ResultLinger, ResultMaxWait: cfg.ResultMaxWait,
	})
	if err := metrics.Waiting(reg, w.consumer.Waiting); err != nil {
		w.close()
		return nil, err
	}
	w.http, err = health.Listen(cfg.HTTPAddr, health.Handler(health.Config{Gatherer: reg, Logger: logger, Version: version.String(), Profiling: cfg.Profiling,
		Live: []health.Check{{Name: "nats", Func: w.conn.Live}}, Ready: []health.Check{
			{Name: "nats", Func: w.conn.Ready},
			{Name: "consumer", Func: w.consumerReady},
		}}))
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *worker) consumerReady(context.Context) error {
	if !w.consumer.Ready() {
		return errors.New("not consuming (starting, stopping or setting the consumer up again)")
	}
	return nil
}

// close releases everything at once, for a start that failed half way.
func (w *worker) close() {
	w.conn.Close()
	w.closeDel(context.Background())
}

// run serves until ctx ends or a part fails, then stops in order: the consumer finishes (or
// hands back) its deliveries, NATS drains what was published, HTTP and the deliverers' connections
// close. It returns nil after a stop asked for through ctx.
func (w *worker) run(ctx context.Context) error {
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	go func() {
		if err := w.http.Serve(); err != nil {
			fail(err)
		}
	}()
	w.log.Info("http listening", "addr", w.http.Addr().String())
	// A server cut off from the rest of its cluster is left for another.
	go w.conn.WatchJetStream(runCtx, natsconn.StreamLed(w.js, bus.NewSubjects(w.cfg.SubjectPrefix).DueStream()), w.log)

	go func() {
		select {
		case <-w.conn.Closed():
			// Closed for good (credentials refused): exit, so that whatever runs the worker
			// starts it again with its credentials as they are now.
			fail(fmt.Errorf("the NATS connection is closed for good: %w", w.conn.Err()))
		case <-runCtx.Done():
		}
	}()
	consErr := w.consumer.Run(runCtx)
	if consErr != nil {
		fail(consErr)
	}
	w.log.Info("worker stopping", "reason", context.Cause(runCtx).Error())
	stopErr := w.stop()

	if cause := context.Cause(runCtx); ctx.Err() == nil || !errors.Is(cause, context.Cause(ctx)) {
		return errors.Join(cause, stopErr)
	}
	return stopErr
}

// stop drains NATS and closes HTTP and the deliverers, within drainTimeout.
func (w *worker) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	var errs []error
	// Drain closes a connection that is not connected at once, and says so; that is no error here.
	if err := w.conn.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrConnectionReconnecting) {
		errs = append(errs, fmt.Errorf("drain nats: %w", err))
	}
	select {
	case <-w.conn.Closed():
	case <-ctx.Done():
		errs = append(errs, errors.New("shutdown timed out draining nats"))
		w.conn.Close()
	}
	if err := w.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop http: %w", err))
	}
	w.closeDel(ctx)
	return errors.Join(errs...)
}
