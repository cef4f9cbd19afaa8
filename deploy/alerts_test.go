package deploy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

const alertsFile = "components/monitoring/prometheusrule.yaml"

// loadAlerts reads the PrometheusRule and parses its spec as Prometheus does a rule file, with
// its expressions and templates checked. The spec is what an operator without the Prometheus
// Operator gives to rule_files (docs/operations.md#alerts).
func loadAlerts(t *testing.T) []rulefmt.Rule {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       map[string]any `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &obj, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" {
		t.Fatalf("%s is %s %s, want a monitoring.coreos.com/v1 PrometheusRule", alertsFile, obj.APIVersion, obj.Kind)
	}
	spec, err := yaml.Marshal(obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("%s: %v", alertsFile, err)
	}
	if t.Failed() {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// Every alert loads as Prometheus would load it, says how grave it is and what it means, and
// points to its section of docs/operations.md; every metric it reads is one the services
// export, as documented.
func TestAlertRules(t *testing.T) {
	rules := loadAlerts(t)
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(ops))
	documented := documentedMetrics(string(ops))
	if len(documented) < 15 {
		t.Fatalf("found %d metrics in docs/operations.md's tables, want them all", len(documented))
	}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("a recording rule %q: the file holds alerts only", r.Record)
			continue
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s: no summary", r.Alert)
		}
		if want := "docs/operations.md#" + strings.ToLower(r.Alert); r.Annotations["runbook"] != want {
			t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
		} else if !anchors[strings.ToLower(r.Alert)] {
			t.Errorf("%s: docs/operations.md has no section %s", r.Alert, r.Alert)
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				name := strings.TrimSuffix(vs.Name, "_bucket")
				if !documented[name] {
					t.Errorf("%s reads %s, which docs/operations.md does not list among the metrics", r.Alert, vs.Name)
				}
			}
			return nil
		})
	}
}

// The component adds the rules to an overlay of the base, in the base's namespace.
func TestMonitoringComponent(t *testing.T) {
	fsys := deployFS(t)
	overlay := "resources: [../../base]\ncomponents: [../../components/monitoring]\n"
	if err := fsys.WriteFile("/deploy/overlays/with-monitoring/kustomization.yaml", []byte(overlay)); err != nil {
		t.Fatal(err)
	}
	m, err := build(fsys, "/deploy/overlays/with-monitoring")
	if err != nil {
		t.Fatal(err)
	}
	rules := m.ofKind("PrometheusRule")
	if len(rules) != 1 || rules[0].GetName() != "resched" || rules[0].GetNamespace() != "resched" {
		t.Fatalf("the overlay holds %d PrometheusRules, want resched/resched", len(rules))
	}
	if n := len(ofType[*appsv1.Deployment](m)); n != 3 {
		t.Errorf("the overlay holds %d Deployments, want the base's 3", n)
	}
	monitors := m.ofKind("PodMonitor")
	if len(monitors) != 1 {
		t.Fatalf("the overlay holds %d PodMonitors, want 1", len(monitors))
	}
	for _, problem := range checkPodMonitor(monitors[0], ofType[*appsv1.Deployment](m)) {
		t.Error(problem)
	}
	// The dashboard, for Grafana's sidecar: found by its label, the JSON whole.
	dashboard := m.configMap("resched-grafana-dashboard")
	if dashboard == nil || dashboard.Labels["grafana_dashboard"] != "1" || dashboard.Namespace != "resched" {
		t.Fatalf("the overlay's Grafana dashboard ConfigMap: %+v, want resched/resched-grafana-dashboard labelled grafana_dashboard=1", dashboard)
	}
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if dashboard.Data["grafana-dashboard.json"] != string(want) {
		t.Error("the ConfigMap does not hold grafana-dashboard.json as it is")
	}
}

// checkPodMonitor says what keeps a PodMonitor from scraping every Deployment's pods: each
// must be selected, and its metrics port (the one prometheus.io/port names) must be the
// endpoint's port name.
func checkPodMonitor(pm *unstructured.Unstructured, deployments []*appsv1.Deployment) []string {
	var spec struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port string `json:"port"`
			Path string `json:"path"`
		} `json:"podMetricsEndpoints"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pm.Object["spec"].(map[string]any), &spec); err != nil {
		return []string{"PodMonitor spec: " + err.Error()}
	}
	selector, err := metav1.LabelSelectorAsSelector(&spec.Selector)
	if err != nil {
		return []string{"PodMonitor selector: " + err.Error()}
	}
	if len(spec.Endpoints) != 1 || spec.Endpoints[0].Path != "/metrics" {
		return []string{fmt.Sprintf("PodMonitor endpoints %+v, want one on /metrics", spec.Endpoints)}
	}
	var problems []string
	for _, d := range deployments {
		pod := d.Spec.Template
		if !selector.Matches(labels.Set(pod.Labels)) {
			problems = append(problems, "the PodMonitor does not select the pods of Deployment/"+d.Name)
			continue
		}
		metricsPort := pod.Annotations["prometheus.io/port"]
		found := false
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == spec.Endpoints[0].Port && fmt.Sprint(p.ContainerPort) == metricsPort {
					found = true
				}
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("Deployment/%s has no port %q on %s, its metrics port", d.Name, spec.Endpoints[0].Port, metricsPort))
		}
	}
	return problems
}

// alertCase is a state of the metrics, held for ten minutes, and whether an alert's expression
// holds at the end. The rule's `for` is Prometheus's to apply; the states here hold longer.
type alertCase struct {
	alert  string
	series string // promqltest load lines, one sample a minute from 0 to 10 minutes
	fires  bool
}

var alertCases = []alertCase{
	{"ReschedNoPlanner", `resched_worker_deliveries_in_flight 0x10`, true},
	{"ReschedNoPlanner", "resched_planner_partitions_held{pod=\"a\"} 0x10\nresched_planner_partitions_held{pod=\"b\"} 0x10", true},
	{"ReschedNoPlanner", "resched_planner_partitions_held{pod=\"a\"} 16x10\nresched_planner_partitions_held{pod=\"b\"} 0x10", false},
	{"ReschedPartitionsUnheld", "resched_planner_partitions_held{pod=\"a\"} 10x10\nresched_planner_partitions_held{pod=\"b\"} 4x10\n" +
		"resched_planner_partitions{pod=\"a\"} 16x10\nresched_planner_partitions{pod=\"b\"} 16x10", true},
	{"ReschedPartitionsUnheld", "resched_planner_partitions_held{pod=\"a\"} 8x10\nresched_planner_partitions_held{pod=\"b\"} 8x10\n" +
		"resched_planner_partitions{pod=\"a\"} 16x10\nresched_planner_partitions{pod=\"b\"} 16x10", false},
	{"ReschedPartitionsUnheld", "resched_planner_partitions_held{namespace=\"a\"} 16x10\nresched_planner_partitions{namespace=\"a\"} 16x10\n" +
		"resched_planner_partitions_held{namespace=\"b\"} 8x10\nresched_planner_partitions{namespace=\"b\"} 16x10", true},
	{"ReschedFiresLate", "resched_planner_fire_lag_seconds_bucket{le=\"0.01\"} 0x10\nresched_planner_fire_lag_seconds_bucket{le=\"10\"} 0x10\n" +
		"resched_planner_fire_lag_seconds_bucket{le=\"30\"} 0+600x10\nresched_planner_fire_lag_seconds_bucket{le=\"+Inf\"} 0+600x10", true},
	{"ReschedFiresLate", "resched_planner_fire_lag_seconds_bucket{le=\"0.01\"} 0+600x10\nresched_planner_fire_lag_seconds_bucket{le=\"10\"} 0+600x10\n" +
		"resched_planner_fire_lag_seconds_bucket{le=\"30\"} 0+600x10\nresched_planner_fire_lag_seconds_bucket{le=\"+Inf\"} 0+600x10", false},
	{"ReschedDueBacklog", `resched_planner_due_backlog{pod="a"} 120x10`, true},
	{"ReschedDueBacklog", `resched_planner_due_backlog{pod="a"} 0x10`, false},
	{"ReschedClockOffset", `resched_planner_clock_offset_seconds{pod="a"} -0.3x10`, true},
	{"ReschedClockOffset", `resched_planner_clock_offset_seconds{pod="a"} 0.02x10`, false},
	{"ReschedPlannerErrors", `resched_planner_errors_total{stage="lease_renew"} 0+5x10`, true},
	{"ReschedPlannerErrors", `resched_planner_errors_total{stage="publish_retry"} 0+5x10`, false},
	{"ReschedPlannerErrors", `resched_planner_errors_total{stage="slot_moving"} 0+5x10`, false},
	{"ReschedPlannerErrors", `resched_planner_errors_total{stage="lease_renew"} 3x10`, false},
	{"ReschedRedisMasterWithoutReplica", "resched_planner_redis_replicas_in_sync{pod=\"a\",master=\"10.0.0.1:6379\"} 1x10\n" +
		"resched_planner_redis_replicas_in_sync{pod=\"a\",master=\"10.0.0.2:6379\"} 1x4 0x6", true},
	{"ReschedRedisMasterWithoutReplica", "resched_planner_redis_replicas_in_sync{pod=\"a\",master=\"10.0.0.1:6379\"} 1x10\n" +
		"resched_planner_redis_replicas_in_sync{pod=\"b\",master=\"10.0.0.1:6379\"} 2x10", false},
	{"ReschedNoWorker", `resched_planner_partitions_held 16x10`, true},
	{"ReschedNoWorker", `resched_worker_deliveries_in_flight{pod="a"} 0x10`, false},
	{"ReschedWorkerErrors", `resched_worker_errors_total{stage="publish_result"} 0+5x10`, true},
	{"ReschedWorkerErrors", `resched_worker_errors_total{stage="publish_result"} 7x10`, false},
	{"ReschedTargetsFailing", "resched_worker_attempts_total{action_type=\"Http\",outcome=\"Failed\"} 0+60x10\n" +
		"resched_worker_attempts_total{action_type=\"Http\",outcome=\"Completed\"} 0+10x10", true},
	{"ReschedTargetsFailing", "resched_worker_attempts_total{action_type=\"Http\",outcome=\"Failed\"} 0+10x10\n" +
		"resched_worker_attempts_total{action_type=\"Http\",outcome=\"Completed\"} 0+60x10", false},
	{"ReschedAPIFailing", "resched_planner_api_requests_total{endpoint=\"jobs-put\",code=\"500\"} 0+10x10\n" +
		"resched_planner_api_requests_total{endpoint=\"jobs-put\",code=\"200\"} 0+100x10", true},
	{"ReschedAPIFailing", "resched_planner_api_requests_total{endpoint=\"jobs-put\",code=\"507\"} 0+10x10\n" +
		"resched_planner_api_requests_total{endpoint=\"jobs-put\",code=\"200\"} 0+100x10", true},
	{"ReschedAPIFailing", "resched_planner_api_requests_total{endpoint=\"jobs-put\",code=\"400\"} 0+50x10\n" +
		"resched_planner_api_requests_total{endpoint=\"jobs-put\",code=\"503\"} 0+1x10\n" +
		"resched_planner_api_requests_total{endpoint=\"jobs-put\",code=\"200\"} 0+100x10", false},
	{"ReschedCollectionWaiting", "resched_worker_deliveries_waiting{pod=\"worker-1\"} 0+10x10\n" +
		"resched_worker_deliveries_waiting{pod=\"worker-2\"} 0x10", true},
	{"ReschedCollectionWaiting", "resched_worker_deliveries_waiting{pod=\"worker-1\"} 0x10\n" +
		"resched_worker_deliveries_waiting{pod=\"worker-2\"} 0x10", false},
	{"ReschedGatewayUnavailable", "resched_gateway_requests_total{operation=\"Jobs_Get\",code=\"503\"} 0+10x10\n" +
		"resched_gateway_requests_total{operation=\"Jobs_Get\",code=\"200\"} 0+100x10", true},
	{"ReschedGatewayUnavailable", "resched_gateway_requests_total{operation=\"Jobs_Get\",code=\"503\"} 0+1x10\n" +
		"resched_gateway_requests_total{operation=\"Jobs_Get\",code=\"200\"} 0+100x10", false},
}

// Each alert's expression holds in a state that should page or warn, and not in a healthy one
// next to it, evaluated by Prometheus's own query engine.
func TestAlertsFireWhenTheyShould(t *testing.T) {
	exprs := map[string]string{}
	for _, r := range loadAlerts(t) {
		exprs[r.Alert] = r.Expr
	}
	engine := promqltest.NewTestEngine(t, false, 0, 100_000)
	tested := map[string]bool{}
	for _, c := range alertCases {
		expr, ok := exprs[c.alert]
		if !ok {
			t.Errorf("no alert %s in %s", c.alert, alertsFile)
			continue
		}
		tested[c.alert] = true
		storage := promqltest.LoadedStorage(t, "load 1m\n  "+strings.ReplaceAll(c.series, "\n", "\n  "))
		q, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(0, 0).Add(10*time.Minute))
		if err != nil {
			t.Fatalf("%s: %v", c.alert, err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("%s: %v", c.alert, res.Err)
		}
		v, err := res.Vector()
		if err != nil {
			t.Fatalf("%s: %v", c.alert, err)
		}
		if fires := len(v) > 0; fires != c.fires {
			t.Errorf("%s with\n%s\nfires: %v, want %v (%v)", c.alert, c.series, fires, c.fires, v)
		}
		q.Close()
	}
	for name := range exprs {
		if !tested[name] {
			t.Errorf("alert %s has no case", name)
		}
	}
}

var metricRow = regexp.MustCompile("(?m)^\\| `(resched_[a-z_]+)` \\|")

// documentedMetrics are the metric names in the first column of docs/operations.md's tables.
func documentedMetrics(doc string) map[string]bool {
	names := map[string]bool{}
	for _, m := range metricRow.FindAllStringSubmatch(doc, -1) {
		names[m[1]] = true
	}
	return names
}

// markdownAnchors are the anchors of a Markdown document's headings, as GitHub makes them:
// lower case, spaces to dashes, other punctuation dropped.
func markdownAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		anchor := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				return r
			}
			return -1
		}, title)
		anchors[anchor] = true
	}
	return anchors
}
