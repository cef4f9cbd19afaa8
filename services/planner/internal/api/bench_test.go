package api_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/apitest"
	"github.com/resched/resched/services/internal/startup"
	"github.com/resched/resched/services/internal/testenv"
)

// TestMain runs the tests and benchmarks with the garbage collector set as bin/planner sets it.
func TestMain(m *testing.M) {
	startup.SetGCPercent(os.Getenv)
	os.Exit(m.Run())
}

// The API benchmarks run one planner's API (api.Server with the default concurrency) on an
// embedded NATS server and a real redis-server, with the clients in the same process; run them
// with -benchtime=1x (each does its whole workload once and reports rates as custom metrics).
// RESCHED_BENCH_PUTS, RESCHED_BENCH_IMPORT and RESCHED_BENCH_DEPTH size them.

// BenchmarkPuts: jobs.put requests from 32 clients at once (over 4 connections), each waiting
// for its answer before sending the next, as 32 threads of an application would.
func BenchmarkPuts(b *testing.B) {
	const clients = 32
	n := benchSize(b, "RESCHED_BENCH_PUTS", 50_000)
	for range b.N {
		e := newEnv(b)
		e.putCollection(b, "c", `{}`)
		conns := make([]*nats.Conn, 4)
		for i := range conns {
			conns[i] = e.nats.Connect(b)
		}
		var next atomic.Int64
		cpu, proc := e.redis.CPU(b), testenv.ProcessCPU(b)
		start := time.Now()
		testenv.Parallel(b, clients, func(w int) error {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := request(conns[w%len(conns)], fmt.Sprintf("jobs.put.c.j%d", i), []byte(hourly)); err != nil {
					return err
				}
			}
			return nil
		})
		took := time.Since(start)
		b.ReportMetric(float64(n)/took.Seconds(), "puts/s")
		b.ReportMetric(float64((e.redis.CPU(b)-cpu).Microseconds())/float64(n), "redis-µs/put")
		b.ReportMetric(float64((testenv.ProcessCPU(b)-proc).Microseconds())/float64(n), "planner+nats+clients-µs/put")
		if os.Getenv("RESCHED_BENCH_REDIS_STATS") != "" {
			st, _ := e.redis.Client(b).Info(b.Context(), "commandstats").Result()
			b.Log(st)
		}
	}
}

// BenchmarkBulkImport puts RESCHED_BENCH_IMPORT definitions (default 1,000,000) as schedctl job
// import sends them: jobs.bulk requests of 1,000 jobs, 8 in flight.
func BenchmarkBulkImport(b *testing.B) {
	n := benchSize(b, "RESCHED_BENCH_IMPORT", 1_000_000)
	for range b.N {
		e := newEnv(b)
		e.putCollection(b, "c", `{}`)
		cpu := e.redis.CPU(b)
		start := time.Now()
		bulkLoad(b, e, n)
		took := time.Since(start)
		b.ReportMetric(float64((e.redis.CPU(b)-cpu).Microseconds())/float64(n), "redis-µs/definition")
		b.ReportMetric(took.Seconds(), "s/import")
		b.ReportMetric(float64(n)/took.Seconds(), "definitions/s")
		mem, err := e.redis.Client(b).Info(b.Context(), "memory").Result()
		if err == nil {
			b.ReportMetric(float64(usedMemory(mem))/float64(n), "redis-bytes/job")
		}
	}
}

// BenchmarkListPage: the page of 100 jobs after the first RESCHED_BENCH_DEPTH (default
// 100,000) of a collection, by cursor (nextLink) and by skip.
func BenchmarkListPage(b *testing.B) {
	depth := benchSize(b, "RESCHED_BENCH_DEPTH", 100_000)
	e := newEnv(b)
	e.putCollection(b, "c", `{}`)
	bulkLoad(b, e, depth+100)
	cursor := fmt.Sprintf(`{"top": 100, "after": %q}`, jobName(depth))
	skip := fmt.Sprintf(`{"top": 100, "skip": %d}`, depth)
	for _, c := range []struct{ name, body string }{{"cursor", cursor}, {"skip", skip}} {
		b.Run(c.name, func(b *testing.B) {
			const pages = 200 // a run of -benchtime=1x still asks for many pages
			var p page[json.RawMessage]
			for b.Loop() {
				for range pages {
					p = page[json.RawMessage]{}
					e.ok(b, "jobs.list.c", c.body, &p)
				}
			}
			if len(p.Value) != 100 || !strings.Contains(string(p.Value[0]), jobName(depth+1)) {
				b.Fatalf("%d jobs on the page, the first not %s", len(p.Value), jobName(depth+1))
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*pages)/1e3, "ms/page")
		})
	}
}

// BenchmarkCollectionsPage: every page of 1,000 of 5,000 and of 50,000 collections (or
// RESCHED_BENCH_COLLECTIONS alone), by cursor, as the gateway and the dashboard read them. A
// page should cost the same at both sizes.
func BenchmarkCollectionsPage(b *testing.B) {
	sizes := []int{5_000, 50_000}
	if os.Getenv("RESCHED_BENCH_COLLECTIONS") != "" {
		sizes = []int{benchSize(b, "RESCHED_BENCH_COLLECTIONS", 0)}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("collections=%d", n), func(b *testing.B) { collectionsPages(b, n) })
	}
}

func collectionsPages(b *testing.B, n int) {
	e := newEnv(b)
	for i := range n {
		e.putCollection(b, fmt.Sprintf("c%06d", i), `{}`)
	}
	pages, listed := 0, 0
	for b.Loop() {
		body := `{"top": 1000}`
		for {
			var p page[json.RawMessage]
			e.ok(b, "collections.list", body, &p)
			pages++
			listed += len(p.Value)
			if p.NextLink == nil {
				break
			}
			next, _ := json.Marshal(p.NextLink)
			body = string(next)
		}
	}
	if listed != n*b.N {
		b.Fatalf("listed %d collections, want %d", listed, n*b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(pages)/1e3, "ms/page")
}

// BenchmarkCollectionState: a collection of RESCHED_BENCH_STATE jobs (default 100,000)
// disabled, then enabled, which computes each job's next time again, as an operator pauses a
// team's jobs and resumes them.
func BenchmarkCollectionState(b *testing.B) {
	n := benchSize(b, "RESCHED_BENCH_STATE", 100_000)
	e := newEnv(b)
	e.putCollection(b, "c", `{}`)
	bulkLoad(b, e, n)
	var disable, enable time.Duration
	for b.Loop() {
		start := time.Now()
		e.ok(b, "collections.disable.c", "", nil)
		mid := time.Now()
		e.ok(b, "collections.enable.c", "", nil)
		disable, enable = disable+mid.Sub(start), enable+time.Since(mid)
	}
	b.ReportMetric(float64(disable.Microseconds())/float64(b.N*n), "µs/job-disabled")
	b.ReportMetric(float64(enable.Microseconds())/float64(b.N*n), "µs/job-enabled")
}

// bulkLoad puts n jobs named jobName(1..n) in collection c through jobs.bulk, as schedctl job
// import sends them.
func bulkLoad(b *testing.B, e *env, n int) {
	b.Helper()
	apitest.BulkPut(b, e.nc, "c", n, func(i int) string { return jobName(i + 1) }, func(int) string { return hourly })
}

// jobName keeps names in index order: j0000001 < j0000002.
func jobName(i int) string { return fmt.Sprintf("j%07d", i) }

// request sends one API request and fails on an error answer.
func request(nc *nats.Conn, subject string, body []byte) error {
	msg, err := nc.Request("scheduler.api."+subject, body, time.Minute)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return fmt.Errorf("%s: error %s: %.200s", subject, code, msg.Data)
	}
	return nil
}

// benchSize reads a size from the environment.
func benchSize(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// usedMemory reads used_memory from an INFO memory answer.
func usedMemory(info string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
