package sdktest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/apitest"

	"github.com/resched/resched/services/internal/testenv"

	"github.com/nats-io/nats.go"
)

// The gateway's benchmarks run the stack of the SDK test (processes: planner, worker, gateway
// over HTTPS; Redis; NATS in this process) on this machine's cores, with -benchtime=1x.

const benchJob = `{"properties": {"startTime": "2030-01-01T00:00:00Z", "action": {"type": "Http",
  "request": {"uri": "http://127.0.0.1:9/", "method": "GET"}}, "recurrence": {"frequency": "Hour", "interval": 1}}}`

// BenchmarkGateway: job GETs and PUTs from 32 clients at once (keep-alive HTTPS), and the
// latency a GET adds over the same request sent to the planners on NATS directly.
func BenchmarkGateway(b *testing.B) {
	const clients, jobs, requests = 32, 1000, 20_000
	s := startStack(b)
	coll := s.base + "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/bench"
	do := func(method, url, body string) error {
		req, err := http.NewRequest(method, url+"?api-version=2016-03-01", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer operator-token")
		resp, err := s.fast().Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so the connection is kept
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %d", method, url, resp.StatusCode)
		}
		return nil
	}
	s.checkTokens(b)
	if err := do("PUT", coll, `{"location": "here", "properties": {"sku": {"name": "P20Premium"}}}`); err != nil {
		b.Fatal(err)
	}
	for i := range jobs {
		if err := do("PUT", fmt.Sprintf("%s/jobs/j%d", coll, i), benchJob); err != nil {
			b.Fatal(err)
		}
	}
	for _, op := range []struct{ name, method, body string }{{"get", "GET", ""}, {"put", "PUT", benchJob}} {
		var next atomic.Int64
		start := time.Now()
		testenv.Parallel(b, clients, func(int) error {
			for i := next.Add(1); i <= requests; i = next.Add(1) {
				if err := do(op.method, fmt.Sprintf("%s/jobs/j%d", coll, i%jobs), op.body); err != nil {
					return err
				}
			}
			return nil
		})
		b.ReportMetric(requests/time.Since(start).Seconds(), op.name+"s/s")
	}

	// Latency, one request at a time: through the gateway, and straight to the planners.
	nc, err := nats.Connect(s.natsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	pname := plannerName(b, nc, "bench")
	var viaGateway, direct []time.Duration
	for i := range 2000 {
		t0 := time.Now()
		if err := do("GET", fmt.Sprintf("%s/jobs/j%d", coll, i%jobs), ""); err != nil {
			b.Fatal(err)
		}
		viaGateway = append(viaGateway, time.Since(t0))
		t0 = time.Now()
		if _, err := nc.Request(fmt.Sprintf("scheduler.api.jobs.get.%s.j%d", pname, i%jobs), nil, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(t0))
	}
	slices.Sort(viaGateway)
	slices.Sort(direct)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b.ReportMetric(ms(viaGateway[len(viaGateway)/2]), "gateway-p50-ms")
	b.ReportMetric(ms(viaGateway[len(viaGateway)*99/100]), "gateway-p99-ms")
	b.ReportMetric(ms(direct[len(direct)/2]), "nats-p50-ms")
	b.ReportMetric(ms(direct[len(direct)*99/100]), "nats-p99-ms")
}

// fast is the test's HTTPS client without the swagger check and the recording, with enough idle
// connections for 32 clients.
func (s *stack) fast() *http.Client {
	s.fastOnce.Do(func() {
		tr := s.client.Transport.(*recordingTransport).next.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		s.fastClient = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	})
	return s.fastClient
}

// checkTokens makes sure the operator token works before the benchmark counts anything.
func (s *stack) checkTokens(b *testing.B) {
	req, _ := http.NewRequest("GET", s.base+"/subscriptions/sub-1/providers/Microsoft.Scheduler/jobCollections?api-version=2016-03-01", nil)
	req.Header.Set("Authorization", "Bearer operator-token")
	resp, err := s.fast().Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("the operator token: %v %v", err, resp)
	}
	resp.Body.Close()
}

// plannerName finds the planners' name of an ARM collection, through the NATS API.
func plannerName(b testing.TB, nc *nats.Conn, armName string) string {
	msg, err := nc.Request("scheduler.api.collections.list", []byte(`{"top": 1000}`), 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for _, part := range strings.Split(string(msg.Data), `"name":"`)[1:] {
		name, _, _ := strings.Cut(part, `"`)
		if strings.HasPrefix(name, armName+"--") {
			return name
		}
	}
	b.Fatalf("no planner collection for %s in %s", armName, msg.Data)
	return ""
}

// BenchmarkDashboardJobsPage: the dashboard's jobs page of a collection of 100,000 jobs
// (RESCHED_BENCH_DEPTH), in Chromium: the time from the navigation to its first 50 jobs on
// screen (each with its last run, read from the history), five times; reported as the median
// and the slowest.
func BenchmarkDashboardJobsPage(b *testing.B) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		b.Fatal("chromium is not on PATH: run scripts/deps.sh browser")
	}
	n := 100_000
	if v := os.Getenv("RESCHED_BENCH_DEPTH"); v != "" {
		fmt.Sscan(v, &n)
	}
	s := startStack(b)
	nc, err := nats.Connect(s.natsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Request("scheduler.api.collections.put.big", []byte(`{}`), 10*time.Second); err != nil {
		b.Fatal(err)
	}
	props := strings.TrimSuffix(strings.TrimPrefix(benchJob, `{"properties": `), "}")
	apitest.BulkPut(b, nc, "big", n, func(i int) string { return fmt.Sprintf("job-%06d", i) }, func(int) string { return props })
	root := testenv.RepoRoot(b)
	cmd := exec.Command("node", filepath.Join("testdata", "dashboard-bench.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(root, "scripts", "browser", "node_modules"), "BASE="+s.base,
		"TOKEN=reader-token", "COLLECTION=big", "CHROMIUM="+chromium, "RUNS=5")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	var ms []float64
	for _, line := range strings.Split(string(out), "\n") {
		var v float64
		if _, err := fmt.Sscanf(line, "first-page-ms %g", &v); err == nil {
			ms = append(ms, v)
		}
	}
	if len(ms) == 0 {
		b.Fatalf("no timing in:\n%s", out)
	}
	slices.Sort(ms)
	b.ReportMetric(ms[len(ms)/2], "first-page-median-ms")
	b.ReportMetric(ms[len(ms)-1], "first-page-max-ms")
	b.ReportMetric(float64(n), "jobs")
}
