package e2ebench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/testenv"
)

// soakEnv is how long TestSoak runs (a Go duration): make soak runs it for 30 minutes; without
// it, make test's short run.
const soakEnv = "RESCHED_SOAK"

// TestSoak runs the system as a user does, for a while, under a steady load with churn: 100
// jobs firing every second to a target that answers 200, 10 to one that answers 500 (a retry,
// then an error action, also refused), and one of those deleted and put again every 2 s (a new
// incarnation each time). It checks that the system holds over time: every occurrence of the
// steady jobs delivered and none early, the streams drained at the end and no deleted job's
// purge left recorded, no error logged, and
// nothing that grows once warm: the goroutines and resident memory of the planner and the
// workers, and Redis's memory once the result ids' window (the duplicate window) and the
// history (10 entries a job here) are full. Each sample is logged.
func TestSoak(t *testing.T) {
	d := 20 * time.Second // make test's run: that the soak works, not what it finds over time
	if v := os.Getenv(soakEnv); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s=%q: %v", soakEnv, v, err)
		}
	}
	const window = time.Minute // the duplicate window, and so the result ids' memory, at its least
	s := startStack(t, 2, "RESCHED_PLANNER_HISTORY_ENTRIES=10", "RESCHED_PLANNER_DUPLICATE_WINDOW="+window.String())
	sk := startSink(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(failing.Close)

	const steadyJobs, failingJobs = 100, 10
	t1 := time.Now().Add(4 * time.Second).Truncate(time.Second)
	end := t1.Add(d)
	every := func(url, extra string) string {
		return `{"startTime": "` + t1.UTC().Format(time.RFC3339) + `", "recurrence": {"frequency": "Second", "interval": 1, "endTime": "` +
			end.Add(-time.Second).UTC().Format(time.RFC3339) + `"}, "action": {"type": "Http", "request": {"uri": "` + url +
			`", "method": "POST", "body": "x"}` + extra + `}}`
	}
	s.putJobs(t, "soak", steadyJobs, func(int) string { return every(sk.url+"/soak", `, "retryPolicy": {"retryType": "None"}`) })
	failingJob := every(failing.URL+"/fail", `, "retryPolicy": {"retryType": "Fixed", "retryInterval": "00:00:15", "retryCount": 1},
		"errorAction": {"type": "Http", "request": {"uri": "`+failing.URL+`/error", "method": "POST"}, "retryPolicy": {"retryType": "None"}}`)
	s.putJobs(t, "churn", failingJobs, func(int) string { return failingJob })

	rdb := s.redis.Client(t) // one connection for the samples: one a sample would grow Redis's memory itself
	var samples []soakSample
	warmAt := t1.Add(max(15*time.Second, d/3))
	redisAt := t1.Add(window + 30*time.Second) // the result ids' window full, and the history
	for tick := 0; time.Now().Before(end); tick++ {
		time.Sleep(time.Until(time.Now().Add(time.Second).Truncate(time.Second)))
		if tick%5 == 0 {
			samples = append(samples, s.sample(t, rdb))
		}
		if tick%2 == 0 {
			name := "j" + strconv.Itoa(tick/2%failingJobs)
			s.request(t, "jobs.delete.churn."+name, "")
			s.request(t, "jobs.put.churn."+name, failingJob)
		}
	}
	want := steadyJobs * int(d/time.Second)
	testenv.Eventually(t, 2*time.Minute, "every steady occurrence delivered", func() bool { return sk.count() >= want })
	time.Sleep(time.Until(end.Add(20 * time.Second))) // the last retries (15 s) and error actions
	testenv.Eventually(t, time.Minute, "the streams drained", func() bool {
		return s.pending(t, dueStream, workers) == 0 && s.pending(t, resultsStream, resultsReaders) == 0
	}, func() string {
		return fmt.Sprintf("due stream: %d not acknowledged; results: %d", s.pending(t, dueStream, workers), s.pending(t, resultsStream, resultsReaders))
	})
	samples = append(samples, s.sample(t, rdb))
	// Every churned job's delete removed its messages from the due stream and ended its record.
	if st := s.status(t); st.Purges != nil {
		t.Errorf("jobs' purges left: %+v", *st.Purges)
	}
	p50, p99, max, early, _ := sk.stats()
	t.Logf("soak of %v: %d steady occurrences delivered (want %d); lag p50 %v p99 %v max %v; early %d",
		d, sk.count(), want, p50.Round(time.Millisecond), p99.Round(time.Millisecond), max.Round(time.Millisecond), early)
	var b strings.Builder
	fmt.Fprintf(&b, "| since the first fire | planner RSS MiB | workers RSS MiB | planner goroutines | workers goroutines | Redis used MiB |\n|---|---:|---:|---:|---:|---:|\n")
	for _, x := range samples {
		fmt.Fprintf(&b, "| %v | %.1f | %.1f | %d | %d | %.1f |\n", x.at.Sub(t1).Round(time.Second), x.plannerRSS, x.workersRSS,
			x.plannerGoroutines, x.workersGoroutines, x.redisUsed)
	}
	t.Logf("samples:\n%s", b.String())
	if early > 0 {
		t.Errorf("%d occurrences delivered before their time", early)
	}
	for _, p := range append([]*testenv.Proc{s.planner}, s.workers...) {
		if n := errorsLogged(t, p.Log); n > 0 {
			t.Errorf("%s logged %d errors:\n%s", p.Name, n, p.Tail())
		}
	}
	checkFlat(t, samples, warmAt, redisAt)
}

// soakSample is what TestSoak looks at, at one time.
type soakSample struct {
	at                                   time.Time
	plannerRSS, workersRSS, redisUsed    float64 // MiB
	plannerGoroutines, workersGoroutines int
}

func (s *stack) sample(t testing.TB, rdb *redis.Client) soakSample {
	t.Helper()
	x := soakSample{at: time.Now(), plannerRSS: rssMiB(t, s.planner.PID()), plannerGoroutines: goroutines(t, s.profiled["planner"])}
	for i, w := range s.workers {
		x.workersRSS += rssMiB(t, w.PID())
		x.workersGoroutines += goroutines(t, s.profiled[fmt.Sprint("worker-", i)])
	}
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseFloat(v, 64)
			x.redisUsed = n / (1 << 20)
		}
	}
	return x
}

// checkFlat fails on what grew once warm: goroutines by more than 25 a process group,
// resident memory to more than twice its warm figure and 32 MiB, Redis's memory (when the run
// outlasted the result ids' window) by more than a fifth and 1 MiB.
func checkFlat(t *testing.T, samples []soakSample, warmAt, redisAt time.Time) {
	t.Helper()
	var warm, redisRef *soakSample
	for i := range samples {
		if warm == nil && !samples[i].at.Before(warmAt) {
			warm = &samples[i]
		}
		if redisRef == nil && !samples[i].at.Before(redisAt) {
			redisRef = &samples[i]
		}
	}
	if warm == nil {
		t.Fatalf("no sample after the warm-up (%v)", warmAt)
	}
	last := samples[len(samples)-1]
	for _, x := range samples {
		if x.at.Before(warm.at) {
			continue
		}
		if x.plannerGoroutines > warm.plannerGoroutines+25 || x.workersGoroutines > warm.workersGoroutines+25 {
			t.Errorf("goroutines grew: planner %d → %d, workers %d → %d", warm.plannerGoroutines, x.plannerGoroutines,
				warm.workersGoroutines, x.workersGoroutines)
			break
		}
	}
	if last.plannerRSS > 2*warm.plannerRSS+32 || last.workersRSS > 2*warm.workersRSS+32 {
		t.Errorf("resident memory grew: planner %.1f → %.1f MiB, workers %.1f → %.1f MiB", warm.plannerRSS, last.plannerRSS,
			warm.workersRSS, last.workersRSS)
	}
	if redisRef != nil && redisRef != &samples[len(samples)-1] && last.redisUsed > 1.2*redisRef.redisUsed+1 {
		t.Errorf("Redis's memory grew past the result ids' window: %.1f → %.1f MiB", redisRef.redisUsed, last.redisUsed)
	}
}

// rssMiB is a process's resident memory.
func rssMiB(t testing.TB, pid int) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	t.Fatalf("no VmRSS for process %d", pid)
	return 0
}

// goroutines is go_goroutines from a service's /metrics.
func goroutines(t testing.TB, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatalf("no go_goroutines at %s", addr)
	return 0
}

// errorsLogged counts a service log's error records.
func errorsLogged(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), `"level":"ERROR"`)
}
