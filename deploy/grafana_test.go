package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
)

const dashboardFile = "components/monitoring/grafana-dashboard.json"

// grafanaDashboard is what the test reads of a Grafana dashboard's JSON model.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// monitoredSeries are series of every metric as the PodMonitor's scrapes label them, for an
// hour at a steady rate: the dashboard's queries must each find something in them.
const monitoredSeries = `
resched_planner_fire_lag_seconds_bucket{namespace="resched",pod="planner-a",le="0.01"} 0+50x60
resched_planner_fire_lag_seconds_bucket{namespace="resched",pod="planner-a",le="0.1"} 0+90x60
resched_planner_fire_lag_seconds_bucket{namespace="resched",pod="planner-a",le="+Inf"} 0+100x60
resched_planner_due_backlog{namespace="resched",pod="planner-a"} 0x60
resched_planner_claimed_total{namespace="resched",pod="planner-a"} 0+100x60
resched_planner_partitions_held{namespace="resched",pod="planner-a"} 16x60
resched_planner_partitions{namespace="resched",pod="planner-a"} 16x60
resched_planner_planners_live{namespace="resched",pod="planner-a"} 1x60
resched_planner_clock_offset_seconds{namespace="resched",pod="planner-a"} 0x60
resched_planner_published_total{namespace="resched",pod="planner-a"} 0+100x60
resched_planner_skipped_total{namespace="resched",pod="planner-a"} 0+1x60
resched_planner_purged_total{namespace="resched",pod="planner-a"} 0+1x60
resched_planner_results_total{namespace="resched",pod="planner-a",status="Completed"} 0+99x60
resched_planner_redis_replicas_in_sync{namespace="resched",pod="planner-a",master="redis"} 1x60
resched_planner_api_requests_total{namespace="resched",pod="planner-a",endpoint="jobs-put",code="200"} 0+10x60
resched_planner_api_request_duration_seconds_bucket{namespace="resched",pod="planner-a",endpoint="jobs-put",le="0.01"} 0+9x60
resched_planner_api_request_duration_seconds_bucket{namespace="resched",pod="planner-a",endpoint="jobs-put",le="+Inf"} 0+10x60
resched_planner_errors_total{namespace="resched",pod="planner-a",stage="dispatch"} 0+1x60
resched_worker_attempts_total{namespace="resched",pod="worker-a",action_type="Http",outcome="Completed"} 0+99x60
resched_worker_attempt_duration_seconds_bucket{namespace="resched",pod="worker-a",action_type="Http",le="0.05"} 0+90x60
resched_worker_attempt_duration_seconds_bucket{namespace="resched",pod="worker-a",action_type="Http",le="+Inf"} 0+99x60
resched_worker_retries_total{namespace="resched",pod="worker-a",action_type="Http"} 0+1x60
resched_worker_deliveries_in_flight{namespace="resched",pod="worker-a"} 3x60
resched_worker_deliveries_waiting{namespace="resched",pod="worker-a"} 0x60
resched_worker_errors_total{namespace="resched",pod="worker-a",stage="setup"} 0+1x60
resched_gateway_requests_total{namespace="resched",pod="gateway-a",operation="Jobs_Get",code="200"} 0+5x60
resched_gateway_request_duration_seconds_bucket{namespace="resched",pod="gateway-a",operation="Jobs_Get",le="0.01"} 0+5x60
resched_gateway_request_duration_seconds_bucket{namespace="resched",pod="gateway-a",operation="Jobs_Get",le="+Inf"} 0+5x60
`

// The Grafana dashboard: every panel's query is PromQL that reads documented metrics and
// finds data in series labelled as the PodMonitor labels them; the panels fit Grafana's
// 24-column grid without overlapping, and read the data source the dashboard asks for.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" {
		t.Errorf("variables %v: want a datasource and a namespace", vars)
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedMetrics(string(ops))
	storage := promqltest.LoadedStorage(t, "load 1m\n  "+strings.ReplaceAll(strings.TrimSpace(monitoredSeries), "\n", "\n  "))
	engine := promqltest.NewTestEngine(t, false, 0, 100_000)
	ids, cells, queries := map[int]bool{}, map[[2]int]string{}, 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, taken := cells[[2]int{x, y}]; taken {
					t.Fatalf("%q overlaps %q at column %d, row %d", p.Title, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%q: data source %q, %d queries: want ${datasource} and a query", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, target := range p.Targets {
			queries++
			checkPanelQuery(t, engine, storage, documented, fmt.Sprintf("%q %s", p.Title, target.RefID), target.Expr)
		}
	}
	if queries < 10 {
		t.Errorf("%d queries: the dashboard is not what the test expects", queries)
	}
}

// checkPanelQuery parses expr, with the dashboard's variables as Grafana fills them when All
// is chosen, checks that it reads only documented metrics, and runs it over the storage.
func checkPanelQuery(t *testing.T, engine *promql.Engine, storage storage.Queryable, documented map[string]bool, what, expr string) {
	t.Helper()
	expr = strings.ReplaceAll(expr, "$namespace", ".*")
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	parser.Inspect(parsed, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && !documented[strings.TrimSuffix(vs.Name, "_bucket")] {
			t.Errorf("%s reads %s, which docs/operations.md does not list among the metrics", what, vs.Name)
		}
		return nil
	})
	q, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(0, 0).Add(30*time.Minute))
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Errorf("%s: %v", what, res.Err)
		return
	}
	if v, err := res.Vector(); err != nil || len(v) == 0 {
		t.Errorf("%s finds nothing in series of every metric (%v): %s", what, err, expr)
	}
}
