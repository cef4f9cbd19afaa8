// Package metrics holds the planner's Prometheus collectors: the fire lag of due occurrences,
// the backlog of due jobs not yet claimed, the counts of claims, publishes, skips, results and
// errors, and the requests its NATS API answered. They are registered on a registry the caller owns (the process exposes it at
// /metrics), never on the global one, so tests and several planners in one process stay apart.
package metrics

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "resched_planner"

// FireLagBuckets span 1 ms (a planner keeping up) to 60 s (a planner far behind), in seconds.
var FireLagBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Stages and statuses that are known up front: their series exist at zero from the start, so
// a rate() over them works before the first error.
var (
	knownStages = []string{"dispatch", "prepare", "publish", "publish_retry", "ack_stall", "result_decode", "result_apply", "slot_moving", "event", "backlog", "replicas",
		"lease_heartbeat", "lease_renew", "lease_acquire", "lease_release"}
	knownStatuses = []string{"Completed", "Failed"}
)

// APIBuckets span 1 ms (a get) to 30 s (the API's bound on one request), in seconds.
var APIBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Planner records what a planner does. It implements dispatch.Metrics, results.Metrics and
// api.Metrics.
type Planner struct {
	fireLag   prometheus.Histogram
	backlog   prometheus.Gauge
	claimed   prometheus.Counter
	published prometheus.Counter
	purged    prometheus.Counter
	skipped   prometheus.Counter
	errors    *prometheus.CounterVec
	results   *prometheus.CounterVec
	held      prometheus.Gauge
	parts     prometheus.Gauge
	planners  prometheus.Gauge
	clock     prometheus.Gauge
	replicas  *prometheus.GaugeVec
	requests  *prometheus.CounterVec
	took      *prometheus.HistogramVec
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Planner, error) {
	p := &Planner{
		fireLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "fire_lag_seconds", Buckets: FireLagBuckets,
			Help: "Time from an occurrence's scheduled time to its publish acknowledgement.",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "due_backlog",
			Help: "Jobs due now that no planner has claimed yet, sampled every few seconds.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "claimed_total", Help: "Due jobs claimed from Redis.",
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "published_total", Help: "Due occurrences published to JetStream and acknowledged.",
		}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "purged_total", Help: "Messages this planner removed from the due stream because their job was deleted or disabled: retries waiting for their interval, error actions, occurrences not yet taken.",
		}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "skipped_total", Help: "Claims that skipped missed occurrences (too late, or missed while no planner ran under the Latest policy); each is one Skipped history entry.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "errors_total", Help: "Errors by the stage they happened in.",
		}, []string{"stage"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "results_total", Help: "Attempt results applied, by their status.",
		}, []string{"status"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "partitions_held", Help: "Partitions whose lease this planner holds: the share of the due set it dispatches.",
		}),
		parts: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "partitions",
			Help: "Partitions the due set is spread over, as recorded in Redis: the sum of partitions_held over the planners, when every partition has one.",
		}),
		planners: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "planners_live", Help: "Planners alive by their heartbeats, as this planner last saw them.",
		}),
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "redis_replicas_in_sync",
			Help: "Replicas in sync of each Redis master (INFO replication, state online), counted every few seconds on a Redis Cluster or Sentinel: at 0 the master's writes wait for no replica, and a failover of it can lose them.",
		}, []string{"master"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "api_requests_total",
			Help: "Requests the NATS API answered, by endpoint (as `nats micro info scheduler` names it) and status (200, or the error's: 400, 404, 409, 500, 503, 507).",
		}, []string{"endpoint", "code"}),
		took: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "api_request_duration_seconds", Buckets: APIBuckets,
			Help: "Time from a request's arrival at this planner to its answer, waiting for a free slot (RESCHED_PLANNER_API_CONCURRENCY) included, by endpoint.",
		}, []string{"endpoint"}),
		clock: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "clock_offset_seconds",
			Help: "How far Redis's clock, the one every planner shares, was ahead of this planner's at its last heartbeat (negative: behind; 0 within the round trip).",
		}),
	}
	for _, c := range []prometheus.Collector{p.fireLag, p.backlog, p.claimed, p.published, p.purged, p.skipped, p.errors, p.results, p.held, p.parts, p.planners, p.clock, p.replicas, p.requests, p.took} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register planner metrics: %w", err)
		}
	}
	for _, s := range knownStages {
		p.errors.WithLabelValues(s)
	}
	for _, s := range knownStatuses {
		p.results.WithLabelValues(s)
	}
	return p, nil
}

// APIRequest records a request the API answered.
func (p *Planner) APIRequest(endpoint string, code int, took time.Duration) {
	p.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
	p.took.WithLabelValues(endpoint).Observe(took.Seconds())
}

// Claimed counts claimed jobs.
func (p *Planner) Claimed(n int) { p.claimed.Add(float64(n)) }

// Published counts published occurrences.
func (p *Planner) Published(n int) { p.published.Add(float64(n)) }

// Purged counts n messages removed from the due stream after their job's delete or disable.
func (p *Planner) Purged(n int) { p.purged.Add(float64(n)) }

// Skipped counts claims that skipped missed occurrences.
func (p *Planner) Skipped(n int) { p.skipped.Add(float64(n)) }

// FireLag observes how late an occurrence was published. A negative lag (clocks of planners
// apart) is recorded as zero.
func (p *Planner) FireLag(d time.Duration) { p.fireLag.Observe(max(d, 0).Seconds()) }

// Error counts an error of a stage.
func (p *Planner) Error(stage string) { p.errors.WithLabelValues(stage).Inc() }

// Result counts an applied result by its status.
func (p *Planner) Result(status string) { p.results.WithLabelValues(status).Inc() }

// Leases sets the partitions held and the planners alive.
func (p *Planner) Leases(held, planners int) {
	p.held.Set(float64(held))
	p.planners.Set(float64(planners))
}

// Partitions sets the number of partitions, once the data layout is checked.
func (p *Planner) Partitions(n int) { p.parts.Set(float64(n)) }

// ClockOffset sets how far Redis's clock was ahead of this planner's.
func (p *Planner) ClockOffset(d time.Duration) { p.clock.Set(d.Seconds()) }

// SetDueBacklog sets the backlog gauge.
func (p *Planner) SetDueBacklog(n int64) { p.backlog.Set(float64(n)) }
