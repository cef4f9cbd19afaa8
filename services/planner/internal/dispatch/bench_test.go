package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/startup"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/dispatch"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// The planner benchmarks of issue 3 run against a real redis-server and an embedded JetStream
// server on this machine; run them with `make bench` (-benchtime=1x: each does its whole
// workload once and reports rates as custom metrics).

const benchDef = `{"startTime":"2026-03-01T12:00:00Z",` + action + `,"recurrence":{"frequency":"Minute"}}`

// TestMain runs the tests and benchmarks with the garbage collector set as bin/planner sets it.
func TestMain(m *testing.M) {
	startup.SetGCPercent(os.Getenv)
	os.Exit(m.Run())
}

// load puts n jobs spread over 50 collections, all due at `due`, through the store's script.
func load(b *testing.B, e *env, n int, def string, due func(i int) time.Time) {
	b.Helper()
	stored := blob(b, def)
	loadJobs(b, e, n, t0, func(int) []byte { return stored }, due)
}

// loadJobs puts n jobs spread over 50 collections, job i with the stored definition def(i),
// accepted at `accepted` and due at due(i), 8 writes at a time.
func loadJobs(b *testing.B, e *env, n int, accepted time.Time, def func(i int) []byte, due func(i int) time.Time) {
	b.Helper()
	ctx := context.Background()
	for c := range 50 {
		if _, _, err := e.svc.PutCollection(ctx, fmt.Sprint("c", c), []byte(`{"properties":{}}`), false); err != nil {
			b.Fatal(err)
		}
	}
	testenv.Parallel(b, 8, func(w int) error {
		for i := w; i < n; i += 8 {
			if _, _, _, err := e.store.PutJob(ctx, store.PutJob{Collection: fmt.Sprint("c", i%50), Name: fmt.Sprint("j", i),
				Definition: def(i), Accepted: accepted, Next: due(i), State: job.StateEnabled, Reaccept: true}); err != nil {
				return err
			}
		}
		return nil
	})
}

// drainWith runs `planners` dispatchers until `n` occurrences are published and returns the
// time it took. RESCHED_BENCH_REDIS_STATS=1 logs Redis's per-command figures for the drain.
func drainWith(b *testing.B, e *env, planners, n int, m *lagRecorder) time.Duration {
	b.Helper()
	if e.redisClient != nil {
		if err := e.redisClient.ConfigResetStat(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	cpuBefore, procBefore := e.redisCPU(b), testenv.ProcessCPU(b)
	start := time.Now()
	var procs []*plannerProc
	for i := range planners {
		procs = append(procs, e.startPlanner(fmt.Sprint("p", i), m, func(c *dispatch.Config) { c.Clock = e.clock.now }))
	}
	testenv.Eventually(b, 5*time.Minute, "the publishes", func() bool { return m.published.Load() >= int64(n) })
	elapsed := time.Since(start)
	for _, pp := range procs {
		pp.stop(true)
	}
	b.ReportMetric(float64(e.redisCPU(b)-cpuBefore)/float64(n)/1e3, "redis-cpu-µs/fire")
	if os.Getenv("RESCHED_BENCH_REDIS_STATS") != "" && e.redisClient != nil {
		st, _ := e.redisClient.Info(context.Background(), "commandstats").Result()
		b.Log(st)
	}
	b.ReportMetric(float64(testenv.ProcessCPU(b)-procBefore)/float64(n)/1e3, "planner+nats-cpu-µs/fire")
	return elapsed
}

// BenchmarkFiresPerSecond: sustained fires per second from the sorted set to JetStream, with
// every job recurring (each fire also computes and stores the next time), against one Redis and
// against a Redis Cluster of 3 masters (all on this machine's cores, beside the planners).
func BenchmarkFiresPerSecond(b *testing.B) {
	for _, topology := range []string{"redis", "cluster3"} {
		for _, planners := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/planners=%d", topology, planners), func(b *testing.B) {
				n := benchJobs(200_000)
				for range b.N {
					e := setupFor(b, topology)
					load(b, e, n, benchDef, func(int) time.Time { return t0 })
					e.clock.set(t0.Add(time.Second))
					elapsed := drainWith(b, e, planners, n, &lagRecorder{})
					b.ReportMetric(float64(n)/elapsed.Seconds(), "fires/s")
				}
			})
		}
	}
}

func setupFor(b *testing.B, topology string) *env {
	if topology == "cluster3" {
		return setupCluster(b)
	}
	return setup(b)
}

// BenchmarkBurst100k: 100,000 occurrences due at the same instant, until all are published.
func BenchmarkBurst100k(b *testing.B) {
	const n = 100_000
	for range b.N {
		e := setup(b)
		load(b, e, n, `{"startTime":"2026-03-01T12:00:00Z",`+action+`}`, func(int) time.Time { return t0 })
		e.clock.set(t0)
		elapsed := drainWith(b, e, 1, n, &lagRecorder{})
		b.ReportMetric(elapsed.Seconds(), "s/burst")
	}
}

// BenchmarkFireLag: steady fires on the real clock for 10 s at 10, 1,000 and 10,000 per second
// (rate×10 jobs every 10 s, a tenth of them due each second); lag is the time from the
// scheduled time to the publish acknowledgement. The CPU per fire is this process's (the
// planner's dispatch and leases, and the embedded NATS server storing the occurrences) over the
// 10 s, idle time included: at 10 fires/s it is mostly what the planner spends waiting.
func BenchmarkFireLag(b *testing.B) {
	const seconds = 10
	for _, rate := range []int{10, 1000, 10_000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			jobs := rate * 10
			for range b.N {
				e := setup(b)
				// Loading takes about 50 µs a job on this machine: the first due second comes after.
				start := time.Now().Add(3*time.Second + time.Duration(jobs)*60*time.Microsecond).Truncate(time.Second)
				var defs [10][]byte
				for k := range defs {
					st := start.Add(time.Duration(k) * time.Second).UTC().Format(time.RFC3339)
					defs[k] = blob(b, `{"startTime":"`+st+`",`+action+`,"recurrence":{"frequency":"Second","interval":10}}`)
				}
				loadJobs(b, e, jobs, start.Add(-time.Second), func(i int) []byte { return defs[i%10] },
					func(i int) time.Time { return start.Add(time.Duration(i%10) * time.Second) })
				if time.Now().After(start) {
					b.Fatal("loading the jobs outlasted their first due second: the lags would measure the loading")
				}
				m := &lagRecorder{}
				// The planner's defaults: a 250 ms lookahead, a partition woken at its earliest job.
				time.Sleep(time.Until(start)) // the real clock is the subject here: CPU is counted from the first due second
				proc := testenv.ProcessCPU(b)
				pp := e.startPlanner("p", m, func(c *dispatch.Config) { c.Lookahead = 250 * time.Millisecond })
				want := int64(jobs / 10 * seconds)
				testenv.Eventually(b, time.Minute, "10 seconds of fires", func() bool { return m.published.Load() >= want })
				if wait := time.Until(start.Add(seconds * time.Second)); wait > 0 {
					time.Sleep(wait) // the whole 10 s, so the idle cost of a slow rate is counted
				}
				cpu := testenv.ProcessCPU(b) - proc
				pp.stop(true)
				lags := m.sorted()
				b.ReportMetric(float64(len(lags))/float64(seconds), "fires/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(len(lags)), "planner+nats-cpu-µs/fire")
				b.ReportMetric(ms(lags[len(lags)/2]), "p50-ms")
				b.ReportMetric(ms(lags[len(lags)*99/100]), "p99-ms")
				b.ReportMetric(ms(lags[0]), "min-ms")
				if lags[0] < 0 {
					b.Errorf("an occurrence was published %v before its scheduled time", -lags[0])
				}
			}
		})
	}
}

// BenchmarkRedisMemoryPerJob: used_memory growth per scheduled job at 1,000,000 jobs.
func BenchmarkRedisMemoryPerJob(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		rs := redistest.Start(b)
		rdb := rs.Client(b)
		s := store.New(rdb, "")
		ctx := context.Background()
		for c := range 50 {
			if _, err := s.PutCollection(ctx, fmt.Sprint("c", c), []byte(`{}`), job.CollectionEnabled, 0, false); err != nil {
				b.Fatal(err)
			}
		}
		stored := blob(b, benchDef)
		before := usedMemory(b, rdb)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := w; i < n; i += 16 {
					if _, _, _, err := s.PutJob(ctx, store.PutJob{Collection: fmt.Sprint("c", i%50), Name: fmt.Sprint("job-", i),
						Definition: stored, Accepted: t0, Next: t0.Add(time.Duration(i) * time.Second),
						State: job.StateEnabled, Reaccept: true}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(usedMemory(b, rdb)-before)/n, "bytes/job")
		b.ReportMetric(float64(len(stored)), "definition-bytes")
	}
}

func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO")
	return 0
}

// lagRecorder is a dispatch.Metrics that keeps every fire lag.
type lagRecorder struct {
	published atomic.Int64
	mu        sync.Mutex
	lags      []time.Duration
}

func (r *lagRecorder) Claimed(int)     {}
func (r *lagRecorder) Published(n int) { r.published.Add(int64(n)) }
func (r *lagRecorder) Skipped(int)     {}
func (r *lagRecorder) Error(string)    {}
func (r *lagRecorder) FireLag(d time.Duration) {
	r.mu.Lock()
	r.lags = append(r.lags, d)
	r.mu.Unlock()
}

func (r *lagRecorder) sorted() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.lags)
	slices.Sort(out)
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchJobs lets a profiling run use fewer jobs: RESCHED_BENCH_JOBS=50000.
func benchJobs(def int) int {
	if n, err := strconv.Atoi(os.Getenv("RESCHED_BENCH_JOBS")); err == nil && n > 0 {
		return n
	}
	return def
}
