package e2ebench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/apitest"
	"github.com/resched/resched/services/internal/bus"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// stack is the system as a user runs it: processes for NATS, Redis, a planner and workers.
type stack struct {
	nats    *testenv.Proc
	redis   *redistest.Server
	planner *testenv.Proc
	workers []*testenv.Proc
	nc      *nats.Conn
	js      jetstream.JetStream
	// profiled are the HTTP addresses of the processes whose CPU profiles a run collects
	// (RESCHED_E2E_PROFILE), by name.
	profiled map[string]string
}

// startStack starts NATS, Redis, a planner (plannerEnv added to its settings) and workers.
func startStack(t testing.TB, workers int, plannerEnv ...string) *stack {
	t.Helper()
	bin := testenv.Build(t, "planner", "worker", "github.com/nats-io/nats-server/v2")
	dir := t.TempDir()
	natsAddr := testenv.FreeAddr(t)
	host, port, _ := strings.Cut(natsAddr, ":")
	s := &stack{redis: redistest.Start(t)}
	natsArgs := []string{"-js", "-sd", filepath.Join(dir, "jetstream"), "-a", host, "-p", port}
	var natsProfile string
	if os.Getenv(profileEnv) != "" {
		natsProfile = testenv.FreeAddr(t)
		_, profilePort, _ := strings.Cut(natsProfile, ":")
		natsArgs = append(natsArgs, "--profile", profilePort)
	}
	s.nats = testenv.Start(t, dir, "nats-server", filepath.Join(bin, "nats-server"), nil, natsArgs...)
	url := "nats://" + natsAddr
	testenv.Eventually(t, 20*time.Second, "nats-server up", func() bool {
		nc, err := nats.Connect(url)
		if err != nil {
			return false
		}
		s.nc = nc
		return true
	}, s.nats.Tail)
	t.Cleanup(s.nc.Close)
	var err error
	if s.js, err = jetstream.New(s.nc); err != nil {
		t.Fatal(err)
	}
	pprof := strconv.FormatBool(os.Getenv(profileEnv) != "")
	plannerHTTP := testenv.FreeAddr(t)
	s.profiled = map[string]string{"planner": plannerHTTP}
	if natsProfile != "" {
		s.profiled["nats-server"] = natsProfile
	}
	s.planner = testenv.Start(t, dir, "planner", filepath.Join(bin, "planner"), append([]string{"NATS_URL=" + url,
		"REDIS_URL=" + s.redis.URL(), "RESCHED_PLANNER_HTTP_ADDR=" + plannerHTTP,
		"RESCHED_PLANNER_PPROF=" + pprof}, plannerEnv...))
	for i := range workers {
		name, addr := fmt.Sprint("worker-", i), testenv.FreeAddr(t)
		s.profiled[name] = addr
		s.workers = append(s.workers, testenv.Start(t, dir, name, filepath.Join(bin, "worker"), []string{
			"NATS_URL=" + url, "RESCHED_WORKER_HTTP_ADDR=" + addr,
			"RESCHED_WORKER_CONCURRENCY=64", "RESCHED_WORKER_PPROF=" + pprof}))
	}
	testenv.Eventually(t, 30*time.Second, "the planner answers", func() bool {
		_, err := s.nc.Request("scheduler.api.collections.list", nil, time.Second)
		return err == nil
	}, s.planner.Tail)
	return s
}

// profileEnv names a directory: each run then writes a CPU profile of the planner and of each
// worker there (<run>-<process>.pprof), for go tool pprof, and Redis's figures for each
// command (<run>-redis-commandstats.txt).
const profileEnv = "RESCHED_E2E_PROFILE"

// profile collects, when profileEnv asks for it, a CPU profile of every Go process of the
// stack for the next d, in the background; the returned func waits for them.
func (s *stack) profile(t testing.TB, run string, d time.Duration) (wait func()) {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.redisCommands(t, filepath.Join(dir, run+"-redis-commandstats.txt"), d) })
	for name, addr := range s.profiled {
		wg.Go(func() {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
			resp, err := http.Get(url)
			if err != nil {
				t.Errorf("profile of %s: %v", name, err)
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, run+"-"+name+".pprof"), b, 0o644)
			}
			if err != nil {
				t.Errorf("profile of %s: %v", name, err)
			}
		})
	}
	return wg.Wait
}

// redisCommands writes Redis's own figures for each command and script called in the next d
// (INFO commandstats: calls and µs of Redis's time each), to be read beside the profiles.
func (s *stack) redisCommands(t testing.TB, path string, d time.Duration) {
	ctx := context.Background()
	rdb := s.redis.Client(t)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Errorf("redis statistics: %v", err)
		return
	}
	time.Sleep(d) // the run being measured goes on meanwhile
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err == nil {
		err = os.WriteFile(path, []byte(stats), 0o644)
	}
	if err != nil {
		t.Errorf("redis statistics: %v", err)
	}
}

// usage is what each process has used so far: its CPU time, and how long its threads waited
// for a CPU while they could have run (only the processes whose kernel figures could be read);
// and the CPU time of the test process, the sink's (and the puts' of a spread run), which is
// not a fire's but takes the same cores.
type usage struct {
	cpu, waited map[string]time.Duration
	harness     time.Duration
}

func (s *stack) usage(t testing.TB) usage {
	u := usage{cpu: map[string]time.Duration{"planner": s.planner.CPU(t), "nats-server": s.nats.CPU(t), "redis": s.redis.CPU(t)},
		waited: map[string]time.Duration{}, harness: testenv.ProcessCPU(t)}
	pids := map[string][]int{"planner": {s.planner.PID()}, "nats-server": {s.nats.PID()}, "redis": {s.redis.PID()}}
	for _, w := range s.workers {
		u.cpu["workers"] += w.CPU(t)
		pids["workers"] = append(pids["workers"], w.PID())
	}
	for name, ps := range pids {
		for _, pid := range ps {
			d, ok := testenv.PIDWaited(pid)
			if !ok {
				delete(u.waited, name)
				break
			}
			u.waited[name] += d
		}
	}
	return u
}

// lastSeq is a stream's last sequence: how many messages it has taken.
func (s *stack) lastSeq(t testing.TB, stream string) uint64 {
	st, err := s.js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// pending is what a consumer has not yet had acknowledged.
func (s *stack) pending(t testing.TB, stream, consumer string) uint64 {
	c, err := s.js.Consumer(context.Background(), stream, consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumPending + uint64(info.NumAckPending)
}

// request calls the NATS API and fails on an error answer.
func (s *stack) request(t testing.TB, subject, body string) {
	msg, err := s.nc.Request("scheduler.api."+subject, []byte(body), time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("%s: %s %s", subject, code, msg.Data)
	}
}

// status is the planners' status (schedctl cluster status).
func (s *stack) status(t testing.TB) bus.Status {
	t.Helper()
	msg, err := s.nc.Request("scheduler.api.status", nil, time.Minute)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var st bus.Status
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatalf("status: %v: %.300s", err, msg.Data)
	}
	return st
}

// putJobs puts n jobs named j<i> in a new collection c; props(i) is a job's properties JSON.
func (s *stack) putJobs(t testing.TB, c string, n int, props func(i int) string) {
	t.Helper()
	s.request(t, "collections.put."+c, `{}`)
	apitest.BulkPut(t, s.nc, c, n, func(i int) string { return "j" + strconv.Itoa(i) }, props)
}

// putEvenly puts n jobs, j0 to j<n-1>, in collection c (which must exist) at rate a second,
// evenly: each millisecond one jobs.bulk request with the jobs due by then, not waiting for the
// answers of the ones before (at most 32 of them). It returns how long the puts took.
func (s *stack) putEvenly(t testing.TB, c string, rate, n int, props string) time.Duration {
	t.Helper()
	name := func(i int) string { return "j" + strconv.Itoa(i) }
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for put := 0; put < n && failed.Load() == nil; {
		<-tick.C
		next := min(int(time.Since(start)*time.Duration(rate)/time.Second), n)
		if next == put {
			continue
		}
		from := put
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := apitest.Bulk(s.nc, c, apitest.BulkBody(from, next, name, func(int) string { return props })); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		put = next
	}
	took := time.Since(start)
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
	return took
}
