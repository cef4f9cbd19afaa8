package metrics

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/resched/resched/services/internal/testenv"
)

func newPlanner(t *testing.T) (*Planner, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return p, reg
}

func TestCounters(t *testing.T) {
	p, reg := newPlanner(t)
	p.Claimed(3)
	p.Claimed(2)
	p.Published(4)
	p.Skipped(1)
	p.Error("publish")
	p.Error("publish")
	p.Error("something_new")
	p.Result("Completed")
	p.Result("Failed")
	p.Result("Failed")
	p.SetDueBacklog(42)
	p.Leases(5, 3)
	p.Partitions(16)
	want := `
# HELP resched_planner_claimed_total Due jobs claimed from Redis.
# TYPE resched_planner_claimed_total counter
resched_planner_claimed_total 5
# HELP resched_planner_published_total Due occurrences published to JetStream and acknowledged.
# TYPE resched_planner_published_total counter
resched_planner_published_total 4
# HELP resched_planner_skipped_total Claims that skipped missed occurrences (too late, or missed while no planner ran under the Latest policy); each is one Skipped history entry.
# TYPE resched_planner_skipped_total counter
resched_planner_skipped_total 1
# HELP resched_planner_errors_total Errors by the stage they happened in.
# TYPE resched_planner_errors_total counter
resched_planner_errors_total{stage="ack_stall"} 0
resched_planner_errors_total{stage="backlog"} 0
resched_planner_errors_total{stage="dispatch"} 0
resched_planner_errors_total{stage="event"} 0
resched_planner_errors_total{stage="lease_acquire"} 0
resched_planner_errors_total{stage="lease_heartbeat"} 0
resched_planner_errors_total{stage="lease_release"} 0
resched_planner_errors_total{stage="lease_renew"} 0
resched_planner_errors_total{stage="prepare"} 0
resched_planner_errors_total{stage="publish"} 2
resched_planner_errors_total{stage="publish_retry"} 0
resched_planner_errors_total{stage="replicas"} 0
resched_planner_errors_total{stage="result_apply"} 0
resched_planner_errors_total{stage="result_decode"} 0
resched_planner_errors_total{stage="slot_moving"} 0
resched_planner_errors_total{stage="something_new"} 1
# HELP resched_planner_results_total Attempt results applied, by their status.
# TYPE resched_planner_results_total counter
resched_planner_results_total{status="Completed"} 1
resched_planner_results_total{status="Failed"} 2
# HELP resched_planner_due_backlog Jobs due now that no planner has claimed yet, sampled every few seconds.
# TYPE resched_planner_due_backlog gauge
resched_planner_due_backlog 42
# HELP resched_planner_partitions_held Partitions whose lease this planner holds: the share of the due set it dispatches.
# TYPE resched_planner_partitions_held gauge
resched_planner_partitions_held 5
# HELP resched_planner_partitions Partitions the due set is spread over, as recorded in Redis: the sum of partitions_held over the planners, when every partition has one.
# TYPE resched_planner_partitions gauge
resched_planner_partitions 16
# HELP resched_planner_planners_live Planners alive by their heartbeats, as this planner last saw them.
# TYPE resched_planner_planners_live gauge
resched_planner_planners_live 3
`
	names := []string{"resched_planner_claimed_total", "resched_planner_published_total", "resched_planner_skipped_total",
		"resched_planner_errors_total", "resched_planner_results_total", "resched_planner_due_backlog",
		"resched_planner_partitions_held", "resched_planner_partitions", "resched_planner_planners_live"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestFireLagBuckets(t *testing.T) {
	p, _ := newPlanner(t)
	for _, d := range []time.Duration{-time.Second, 500 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second, 90 * time.Second} {
		p.FireLag(d)
	}
	want := `
# HELP resched_planner_fire_lag_seconds Time from an occurrence's scheduled time to its publish acknowledgement.
# TYPE resched_planner_fire_lag_seconds histogram
resched_planner_fire_lag_seconds_bucket{le="0.001"} 2
resched_planner_fire_lag_seconds_bucket{le="0.0025"} 2
resched_planner_fire_lag_seconds_bucket{le="0.005"} 3
resched_planner_fire_lag_seconds_bucket{le="0.01"} 3
resched_planner_fire_lag_seconds_bucket{le="0.025"} 3
resched_planner_fire_lag_seconds_bucket{le="0.05"} 3
resched_planner_fire_lag_seconds_bucket{le="0.1"} 3
resched_planner_fire_lag_seconds_bucket{le="0.25"} 3
resched_planner_fire_lag_seconds_bucket{le="0.5"} 3
resched_planner_fire_lag_seconds_bucket{le="1"} 3
resched_planner_fire_lag_seconds_bucket{le="2.5"} 4
resched_planner_fire_lag_seconds_bucket{le="5"} 4
resched_planner_fire_lag_seconds_bucket{le="10"} 4
resched_planner_fire_lag_seconds_bucket{le="30"} 4
resched_planner_fire_lag_seconds_bucket{le="60"} 4
resched_planner_fire_lag_seconds_bucket{le="+Inf"} 5
resched_planner_fire_lag_seconds_sum 92.0035
resched_planner_fire_lag_seconds_count 5
`
	if err := testutil.CollectAndCompare(p.fireLag, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestAPIRequests(t *testing.T) {
	p, reg := newPlanner(t)
	if n := testutil.CollectAndCount(p.requests); n != 0 {
		t.Errorf("%d request series before any request", n)
	}
	p.APIRequest("jobs-put", 200, 2*time.Millisecond)
	p.APIRequest("jobs-put", 400, 500*time.Microsecond)
	p.APIRequest("jobs-get", 404, time.Millisecond)
	if got := testutil.ToFloat64(p.requests.WithLabelValues("jobs-put", "400")); got != 1 {
		t.Errorf("jobs-put 400: %v, want 1", got)
	}
	if n := testutil.CollectAndCount(p.requests); n != 3 {
		t.Errorf("%d request series, want 3", n)
	}
	want := `
# HELP resched_planner_api_request_duration_seconds Time from a request's arrival at this planner to its answer, waiting for a free slot (RESCHED_PLANNER_API_CONCURRENCY) included, by endpoint.
# TYPE resched_planner_api_request_duration_seconds histogram
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.001"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.0025"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.005"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.01"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.025"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.05"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.1"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.25"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="0.5"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="1"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="2.5"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="5"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="10"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="30"} 1
resched_planner_api_request_duration_seconds_bucket{endpoint="jobs-get",le="+Inf"} 1
resched_planner_api_request_duration_seconds_sum{endpoint="jobs-get"} 0.001
resched_planner_api_request_duration_seconds_count{endpoint="jobs-get"} 1
`
	if err := testutil.CollectAndCompare(p.took.WithLabelValues("jobs-get").(prometheus.Histogram), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "resched_planner_api_request_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want one per endpoint", n)
	}
}

func TestNoGlobalRegistryAndNoDoubleRegistration(t *testing.T) {
	_, reg := newPlanner(t)
	if _, err := New(reg); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
	if _, err := New(prometheus.NewRegistry()); err != nil {
		t.Errorf("a second planner on its own registry: %v", err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestSampleDueBacklog(t *testing.T) {
	p, _ := newPlanner(t)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	// The first sample happens at once; the counter ends the run, so the test waits on nothing.
	p.SampleDueBacklog(ctx, time.Hour, func(ctx context.Context, now time.Time) (int64, error) {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("sample without a timeout")
		}
		cancel()
		return 17, nil
	}, nil)
	if calls != 1 {
		t.Errorf("counted %d times, want 1", calls)
	}
	if got := testutil.ToFloat64(p.backlog); got != 17 {
		t.Errorf("backlog %v, want 17", got)
	}

	failing := func(context.Context, time.Time) (int64, error) { return 0, errors.New("redis down") }
	p.sample(context.Background(), time.Second, failing, slog.New(slog.DiscardHandler))
	if got := testutil.ToFloat64(p.backlog); got != 17 {
		t.Errorf("a failed sample changed the backlog to %v", got)
	}
	if got := testutil.ToFloat64(p.errors.WithLabelValues("backlog")); got != 1 {
		t.Errorf("backlog errors %v, want 1", got)
	}
}

func TestSampleReplicas(t *testing.T) {
	p, reg := newPlanner(t)
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	// The first count happens at once; it ends the run, so the test waits on nothing.
	p.SampleReplicas(ctx, time.Hour, func(ctx context.Context) (map[string]int, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("count without a timeout")
		}
		cancel()
		return map[string]int{"10.0.0.1:6379": 1, "10.0.0.2:6379": 0}, nil
	}, logger)
	want := `
# HELP resched_planner_redis_replicas_in_sync Replicas in sync of each Redis master (INFO replication, state online), counted every few seconds on a Redis Cluster or Sentinel: at 0 the master's writes wait for no replica, and a failover of it can lose them.
# TYPE resched_planner_redis_replicas_in_sync gauge
resched_planner_redis_replicas_in_sync{master="10.0.0.1:6379"} 1
resched_planner_redis_replicas_in_sync{master="10.0.0.2:6379"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "resched_planner_redis_replicas_in_sync"); err != nil {
		t.Error(err)
	}

	// A failed count leaves the series, counts an error and is logged once while it lasts.
	failing := func(context.Context) (map[string]int, error) { return nil, errors.New("NOPERM") }
	if !p.sampleReplicas(context.Background(), time.Second, failing, logger, false) ||
		!p.sampleReplicas(context.Background(), time.Second, failing, logger, true) {
		t.Error("a failed count not reported as failing")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "resched_planner_redis_replicas_in_sync"); err != nil {
		t.Errorf("after a failed count: %v", err)
	}
	if got := testutil.ToFloat64(p.errors.WithLabelValues("replicas")); got != 2 {
		t.Errorf("replicas errors %v, want 2", got)
	}
	if n := strings.Count(logs.String(), "count the Redis replicas in sync"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}

	// A master gone (failed over) leaves; the one master off a Cluster is named "redis".
	p.sampleReplicas(context.Background(), time.Second, func(context.Context) (map[string]int, error) {
		return map[string]int{"": 2}, nil
	}, logger, true)
	want = `
# HELP resched_planner_redis_replicas_in_sync Replicas in sync of each Redis master (INFO replication, state online), counted every few seconds on a Redis Cluster or Sentinel: at 0 the master's writes wait for no replica, and a failover of it can lose them.
# TYPE resched_planner_redis_replicas_in_sync gauge
resched_planner_redis_replicas_in_sync{master="redis"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "resched_planner_redis_replicas_in_sync"); err != nil {
		t.Errorf("after a failover: %v", err)
	}
}

func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	testenv.CheckMetricsDocumented(t, "resched_planner_", func(reg prometheus.Registerer) error {
		_, err := New(reg)
		return err
	})
}
