// Package metrics holds the worker's Prometheus collectors: attempts by action type and
// outcome with their latency, retries scheduled, deliveries in flight, and errors by stage.
// They are registered on a registry the caller owns (the process exposes it at /metrics),
// never on the global one, so tests and several workers in one process stay apart.
package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/resched/resched/shared/job"
)

const namespace = "resched_worker"

// LatencyBuckets span 5 ms (a target next door) to 60 s (the HTTP time-out), in seconds.
var LatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Series that exist at zero from the start, so a rate() over them works before the first
// event.
var (
	knownTypes    = []job.ActionType{job.ActionHTTP, job.ActionHTTPS, job.ActionStorageQueue, job.ActionServiceBusQueue, job.ActionServiceBusTopic}
	knownStatuses = []job.ExecutionStatus{job.ExecutionCompleted, job.ExecutionFailed}
	knownStages   = []string{"setup", "malformed", "publish_result", "publish_error_action", "ack", "nak", "term", "in_progress"}
)

// Worker records what a worker does. It implements consumer.Metrics.
type Worker struct {
	attempts *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	retries  *prometheus.CounterVec
	inFlight prometheus.Gauge
	errors   *prometheus.CounterVec
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Worker, error) {
	w := &Worker{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "attempts_total",
			Help: "Delivery attempts by action type and outcome (Completed or Failed).",
		}, []string{"action_type", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "attempt_duration_seconds", Buckets: LatencyBuckets,
			Help: "Time an attempt took, from its start to the target's answer, by action type.",
		}, []string{"action_type"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "retries_total",
			Help: "Failed attempts scheduled for a retry, by action type.",
		}, []string{"action_type"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "deliveries_in_flight", Help: "Deliveries running now.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "errors_total", Help: "Errors by the stage they happened in.",
		}, []string{"stage"}),
	}
	for _, c := range []prometheus.Collector{w.attempts, w.latency, w.retries, w.inFlight, w.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register worker metrics: %w", err)
		}
	}
	for _, t := range knownTypes {
		for _, s := range knownStatuses {
			w.attempts.WithLabelValues(string(t), string(s))
		}
		w.retries.WithLabelValues(string(t))
	}
	for _, s := range knownStages {
		w.errors.WithLabelValues(s)
	}
	return w, nil
}

// InFlight moves the in-flight gauge.
func (w *Worker) InFlight(delta int) { w.inFlight.Add(float64(delta)) }

// Attempt counts an attempt and observes its duration.
func (w *Worker) Attempt(t job.ActionType, s job.ExecutionStatus, d time.Duration) {
	w.attempts.WithLabelValues(string(t), string(s)).Inc()
	w.latency.WithLabelValues(string(t)).Observe(max(d, 0).Seconds())
}

// Retry counts a retry scheduled.
func (w *Worker) Retry(t job.ActionType) { w.retries.WithLabelValues(string(t)).Inc() }

// Error counts an error of a stage.
func (w *Worker) Error(stage string) { w.errors.WithLabelValues(stage).Inc() }

// Waiting registers the gauge of the due messages a worker holds until their collection's
// turn (RESCHED_WORKER_COLLECTION_CONCURRENCY), read from waiting when scraped.
func Waiting(reg prometheus.Registerer, waiting func() int) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "deliveries_waiting",
		Help: "Due occurrences held until their collection has fewer deliveries in flight than its limit.",
	}, func() float64 { return float64(waiting()) })
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register worker metrics: %w", err)
	}
	return nil
}
