package e2ebench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

// sizes are the runs: make bench-e2e sets RESCHED_E2E=full; make test runs the short ones;
// RESCHED_E2E=burst runs the full burst alone, RESCHED_E2E=steady the aligned rates alone for
// 30 s, RESCHED_E2E=spread the spread rates alone for 30 s.
type sizes struct {
	burst    int
	rates    []int // aligned on whole seconds
	spread   []int // spread evenly within the second
	duration time.Duration
}

func sizesFor() sizes {
	switch os.Getenv("RESCHED_E2E") {
	case "full":
		return sizes{burst: 100_000, rates: []int{1000, 5000}, spread: []int{1000, 5000}, duration: 60 * time.Second}
	case "burst": // the full burst alone, for profiling a change
		return sizes{burst: 100_000}
	case "steady": // the full rates alone, for half as long
		return sizes{rates: []int{1000, 5000}, duration: 30 * time.Second}
	case "spread":
		return sizes{spread: []int{1000, 5000}, duration: 30 * time.Second}
	}
	return sizes{burst: 2_000, rates: []int{200}, spread: []int{200}, duration: 5 * time.Second}
}

const (
	dueStream      = "SCHEDULER_DUE"
	resultsStream  = "SCHEDULER_RESULTS"
	resultsReaders = "planner-results"
	workers        = "workers"
)

// TestEndToEnd runs the burst and the steady rates with one planner and two workers, and
// reports what docs/benchmarks.md ("End to end") lists. It fails on an early fire or an
// occurrence not delivered or not recorded, never on a figure.
func TestEndToEnd(t *testing.T) {
	sz := sizesFor()
	s := startStack(t, 2)
	sk := startSink(t)
	t.Logf("load average before: %s; the host's speed: %v", loadAverage(), hostSpeed())
	sc := &scorecard{}
	if sz.burst > 0 {
		burst(t, s, sk, sc, sz.burst)
	}
	for _, rate := range sz.rates {
		steady(t, s, sk, sc, rate, sz.duration)
	}
	for _, rate := range sz.spread {
		spread(t, s, sk, sc, rate, sz.duration)
	}
	t.Logf("load average after: %s; the host's speed: %v", loadAverage(), hostSpeed())
	sc.log(t)
}

func action(url string) string {
	return `"action": {"type": "Http", "request": {"uri": "` + url + `", "method": "POST", "body": "x"}, "retryPolicy": {"retryType": "None"}}`
}

// burst: n one-time jobs due at the same second.
func burst(t *testing.T, s *stack, sk *sink, sc *scorecard, n int) {
	sk.reset()
	t0 := time.Now().Add(5*time.Second + time.Duration(n)*120*time.Microsecond).Truncate(time.Second)
	body := `{"startTime": "` + t0.UTC().Format(time.RFC3339) + `", ` + action(sk.url+"/burst") + `}`
	s.putJobs(t, "burst", n, func(int) string { return body })
	if time.Now().After(t0.Add(-500 * time.Millisecond)) {
		t.Fatalf("loading %d jobs outlasted their due time", n)
	}
	dueBase, resBase := s.lastSeq(t, dueStream), s.lastSeq(t, resultsStream)
	before := s.usage(t)
	time.Sleep(time.Until(t0.Add(-200 * time.Millisecond)))
	defer s.profile(t, "burst", 20*time.Second)()
	var onStream, delivered, recorded time.Duration
	deadline := t0.Add(5 * time.Minute)
	for recorded == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("burst: after 5 minutes, %d on the due stream, %d delivered, %d due not settled, %d results not applied", s.lastSeq(t, dueStream)-dueBase, sk.count(),
				s.pending(t, dueStream, workers), s.pending(t, resultsStream, resultsReaders))
		}
		time.Sleep(20 * time.Millisecond) // polling other processes' progress
		if onStream == 0 && s.lastSeq(t, dueStream)-dueBase >= uint64(n) {
			onStream = time.Since(t0)
		}
		if delivered == 0 && sk.count() >= n {
			_, _, _, _, last := sk.stats()
			delivered = last.Sub(t0)
		}
		// A worker acknowledges an occurrence once the results stream has its result (alone or
		// in a batch): with nothing left on the due stream, the results stream holds them all.
		if delivered != 0 && s.pending(t, dueStream, workers) == 0 && s.pending(t, resultsStream, resultsReaders) == 0 {
			recorded = time.Since(t0)
		}
	}
	p50, p99, max, early, _ := sk.stats()
	cpu := report(t, fmt.Sprintf("burst of %d", n), n, before, s.usage(t),
		fmt.Sprintf("on the due stream %.2f s, delivered %.2f s, recorded %.2f s after T0 (%d results messages); lag p50 %v p99 %v max %v; early %d",
			onStream.Seconds(), delivered.Seconds(), recorded.Seconds(), s.lastSeq(t, resultsStream)-resBase,
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), max.Round(time.Millisecond), early))
	sc.burst(n, onStream, delivered, cpu, early)
	if early > 0 {
		t.Errorf("%d occurrences delivered before their time", early)
	}
	s.request(t, "collections.delete.burst", "")
}

// steady: rate jobs every second (aligned on whole seconds, as the engine schedules) for d.
func steady(t *testing.T, s *stack, sk *sink, sc *scorecard, rate int, d time.Duration) {
	sk.reset()
	t1 := time.Now().Add(4*time.Second + time.Duration(rate)*150*time.Microsecond).Truncate(time.Second)
	end := t1.Add(d)
	body := `{"startTime": "` + t1.UTC().Format(time.RFC3339) + `", "recurrence": {"frequency": "Second", "interval": 1, "endTime": "` +
		end.Add(-time.Second).UTC().Format(time.RFC3339) + `"}, ` + action(sk.url+"/steady") + `}`
	s.putJobs(t, "steady", rate, func(int) string { return body })
	if time.Now().After(t1.Add(-500 * time.Millisecond)) {
		t.Fatalf("loading %d jobs outlasted their first due time", rate)
	}
	before := s.usage(t)
	time.Sleep(time.Until(t1))
	defer s.profile(t, fmt.Sprint("steady-", rate), d)()
	want := rate * int(d/time.Second)
	testenv.Eventually(t, time.Until(end)+2*time.Minute, "every occurrence delivered", func() bool { return sk.count() >= want })
	time.Sleep(time.Until(end.Add(time.Second))) // the real clock is what is measured: nothing more may come
	testenv.Eventually(t, time.Minute, "every result recorded", func() bool {
		return s.pending(t, dueStream, workers) == 0 && s.pending(t, resultsStream, resultsReaders) == 0
	})
	p50, p99, max, early, _ := sk.stats()
	cpu := report(t, fmt.Sprintf("steady %d/s for %v", rate, d), sk.count(), before, s.usage(t),
		fmt.Sprintf("%d delivered (%.0f/s); lag p50 %v p99 %v max %v; early %d", sk.count(), float64(sk.count())/d.Seconds(),
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), max.Round(time.Millisecond), early))
	sc.aligned(rate, p99, cpu, early)
	if early > 0 {
		t.Errorf("%d occurrences delivered before their time", early)
	}
	s.request(t, "collections.delete.steady", "")
}

// spread: rate one-time jobs a second put evenly for d, without a startTime, so that each runs
// at the millisecond it is accepted (docs/recurrence.md). The engine schedules recurring jobs in
// whole seconds, so this is how a rate spread within the second arises: work created as it is
// needed, as a queue's enqueue. The lag at the sink is from the job's acceptance to its
// delivery, its put included; so is the CPU per fire. What the put alone costs is measured
// first, at the same rate for at most 10 s, with jobs that never come due in the run.
func spread(t *testing.T, s *stack, sk *sink, sc *scorecard, rate int, d time.Duration) {
	const c, putOnly = "spread", "spread-put"
	n := rate * int(min(d, 10*time.Second)/time.Second)
	s.request(t, "collections.put."+putOnly, `{}`)
	later := `{"startTime": "` + time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339) + `", ` + action(sk.url+"/spread") + `}`
	putBefore := s.usage(t).cpu
	s.putEvenly(t, putOnly, rate, n, later)
	putAfter := s.usage(t).cpu
	putCPU := total(putBefore, putAfter)
	s.request(t, "collections.delete."+putOnly, "")

	sk.reset()
	s.request(t, "collections.put."+c, `{}`)
	want := rate * int(d/time.Second)
	before := s.usage(t)
	defer s.profile(t, fmt.Sprint("spread-", rate), d)()
	start := time.Now()
	putFor := s.putEvenly(t, c, rate, want, `{`+action(sk.url+"/spread")+`}`)
	testenv.Eventually(t, 2*time.Minute, "every occurrence delivered", func() bool { return sk.count() >= want })
	testenv.Eventually(t, time.Minute, "every result recorded", func() bool {
		return s.pending(t, dueStream, workers) == 0 && s.pending(t, resultsStream, resultsReaders) == 0
	})
	p50, p99, max, early, last := sk.stats()
	achieved := float64(sk.count()) / last.Sub(start).Seconds()
	cpu := report(t, fmt.Sprintf("spread %d/s for %v", rate, d), sk.count(), before, s.usage(t),
		fmt.Sprintf("%d put in %.1f s (the put alone: %.0f µs of CPU per job: %s), delivered by %.1f s (%.0f/s); lag from acceptance p50 %v p99 %v max %v; early %d",
			want, putFor.Seconds(), float64(putCPU.Microseconds())/float64(n), perFire(putBefore, putAfter, n), last.Sub(start).Seconds(), achieved,
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), max.Round(time.Millisecond), early))
	sc.spread(rate, achieved, p99, cpu, putCPU/time.Duration(n), early)
	if early > 0 {
		t.Errorf("%d occurrences delivered before their time", early)
	}
	s.request(t, "collections.delete."+c, "")
}

// report logs a run's figures, the CPU each process spent per fire and how long each waited
// for a CPU per fire: a process that waits long beside its CPU time was held back by the
// others on the machine's cores. It answers the CPU of every process together per fire.
func report(t *testing.T, name string, fires int, before, after usage, figures string) time.Duration {
	waited := "not kept by this kernel"
	if len(after.waited) > 0 {
		waited = perFire(before.waited, after.waited, fires)
	}
	t.Logf("%s: %s; CPU µs per fire: %s; all %.0f; waited for a CPU, µs per fire: %s; the test process (the sink, a spread run's puts) %.0f µs of CPU per fire",
		name, figures, perFire(before.cpu, after.cpu, fires), float64(total(before.cpu, after.cpu).Microseconds())/float64(fires), waited,
		float64((after.harness-before.harness).Microseconds())/float64(fires))
	return total(before.cpu, after.cpu) / time.Duration(fires)
}

// perFire lists each process's time between two readings, in µs per fire.
func perFire(before, after map[string]time.Duration, fires int) string {
	var names []string
	for k := range after {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, float64((after[k]-before[k]).Microseconds())/float64(fires)))
	}
	return strings.Join(parts, ", ")
}

// total is the CPU all processes spent between two readings.
func total(before, after map[string]time.Duration) time.Duration {
	var sum time.Duration
	for k, v := range after {
		sum += v - before[k]
	}
	return sum
}

// hostSpeed is the time one core takes for a fixed piece of work (sorting 2 MiB of random
// numbers, the best of 20 tries, which leaves out a try another process interrupted). A run's
// CPU per fire moves from hour to hour by a fifth or more; this figure says whether the host's
// own speed moved with it. Readings a few seconds apart differ by up to about 3 % on a quiet
// host.
func hostSpeed() time.Duration {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]uint64, 1<<18)
	for i := range src {
		src[i] = r.Uint64()
	}
	buf := make([]uint64, len(src))
	best := time.Duration(1<<63 - 1)
	for range 20 {
		copy(buf, src)
		start := time.Now()
		slices.Sort(buf)
		best = min(best, time.Since(start))
	}
	return best.Round(100 * time.Microsecond)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
