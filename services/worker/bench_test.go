package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// The worker benchmarks of issue 4 run real worker processes, built from this package with
// go build, against a JetStream server embedded in the benchmark process and a keep-alive
// HTTP sink, also in the benchmark process. Run them with `make bench` (-benchtime=1x: each
// does its whole workload once and reports rates as custom metrics).

const (
	// defaultBenchConcurrency is RESCHED_WORKER_CONCURRENCY of every worker unless
	// RESCHED_BENCH_CONCURRENCY says otherwise: 64 deliveries in flight, as many as the HTTP
	// transport keeps idle connections per host, so a busy worker reuses its connections
	// instead of opening new ones.
	defaultBenchConcurrency = 64
	// benchDeadline bounds every wait of the benchmarks.
	benchDeadline = 5 * time.Minute
	// benchCollection holds every benchmark job; benchJobCount jobs share the occurrences.
	benchCollection = "bench"
	benchJobCount   = 1000
)

// benchEpoch is the scheduled time of the first occurrence; occurrence i is due i ms later, so
// every message id is unique.
var benchEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// BenchmarkWorkerHTTPDeliveries: N due occurrences wait in the due stream (preloaded before
// the workers start), then K worker processes deliver them to the sink. The rate is counted
// from the first to the last arrival at the sink, so process start-up is left out.
func BenchmarkWorkerHTTPDeliveries(b *testing.B) {
	bin := buildWorker(b)
	n := benchDeliveries(50_000)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for range b.N {
				e := newBenchEnv(b, n)
				e.preload(b, n)
				cpuBefore, busyBefore, wallBefore := testenv.ProcessCPU(b), machineBusy(), time.Now()
				procs := make([]*workerProc, workers)
				for k := range procs {
					procs[k] = startWorkerProc(b, bin, e.srv.ClientURL())
				}
				e.sink.wait(b, n, anyExited(procs))
				benchCPU := testenv.ProcessCPU(b) - cpuBefore
				var workerCPU time.Duration
				for _, p := range procs {
					workerCPU += p.stop(b)
				}
				if busyBefore >= 0 {
					others := machineBusy() - busyBefore - benchCPU - workerCPU
					b.ReportMetric(100*others.Seconds()/time.Since(wallBefore).Seconds()/float64(runtime.NumCPU()), "other-cpu-%")
				}
				elapsed := e.sink.span()
				rate := float64(n-1) / elapsed.Seconds()
				b.ReportMetric(rate, "deliveries/s")
				b.ReportMetric(rate/float64(workers), "deliveries/s/worker")
				b.ReportMetric(micros(workerCPU)/float64(n), "worker-cpu-µs/delivery")
				b.ReportMetric(micros(benchCPU)/float64(n), "nats+sink-cpu-µs/delivery")
				if d := e.sink.duplicates.Load(); d > 0 {
					b.Errorf("%d occurrences reached the sink twice", d)
				}
			}
		})
	}
}

// BenchmarkWorkerLatency: one worker process while a publisher puts 1,000 due occurrences a
// second into the due stream for 10 s; latency is the time from the publish call to the
// request's arrival at the sink, so it covers JetStream storing the message, the worker's
// pull, decoding and the HTTP request.
func BenchmarkWorkerLatency(b *testing.B) {
	const rate, seconds = 1000, 10
	bin := buildWorker(b)
	n := rate * seconds
	for range b.N {
		e := newBenchEnv(b, n)
		w := startWorkerProc(b, bin, e.srv.ClientURL())
		w.waitReady(b)
		published, took := e.publishSteady(b, n, rate)
		e.sink.wait(b, n, w.exited)
		w.stop(b)
		lat := make([]time.Duration, n)
		for i := range lat {
			lat[i] = time.Duration(e.sink.arrived[i].Load() - published[i])
		}
		slices.Sort(lat)
		b.ReportMetric(float64(n)/took.Seconds(), "published/s")
		b.ReportMetric(ms(lat[n/2]), "p50-ms")
		b.ReportMetric(ms(lat[n*99/100]), "p99-ms")
		b.ReportMetric(ms(lat[n-1]), "max-ms")
		if e.sink.duplicates.Load() > 0 {
			b.Errorf("%d occurrences reached the sink twice", e.sink.duplicates.Load())
		}
	}
}

// BenchmarkWorkerInProcess is a profiling aid, skipped unless -cpuprofile is given: the
// throughput benchmark with one worker running inside the benchmark process, so that one Go
// profile shows the worker, the JetStream server and the sink side by side:
//
//	go test -run '^$' -bench WorkerInProcess -benchtime=1x -cpuprofile cpu.out ./worker/
func BenchmarkWorkerInProcess(b *testing.B) {
	if f := flag.Lookup("test.cpuprofile"); f == nil || f.Value.String() == "" {
		b.Skip("a profiling aid: run it with -cpuprofile")
	}
	n := benchDeliveries(50_000)
	for range b.N {
		e := newBenchEnv(b, n)
		e.preload(b, n)
		cfg := defaultConfig()
		cfg.NATS.URL, cfg.HTTPAddr, cfg.Concurrency = e.srv.ClientURL(), "127.0.0.1:0", benchConcurrency()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil))) }()
		e.sink.wait(b, n, nil)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n-1)/e.sink.span().Seconds(), "deliveries/s")
	}
}

// buildWorker builds the worker command into the benchmark's temporary directory. It is built
// once per top-level benchmark rather than cached for the whole run: without a hook at the end
// of the run (TestMain belongs to the process tests) a shared binary could not be removed. The
// build cache makes the second build a link of about a second.
func buildWorker(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "worker")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build the worker: %v\n%s", err, out)
	}
	return bin
}

// benchConcurrency lets a run try another concurrency: RESCHED_BENCH_CONCURRENCY=16.
func benchConcurrency() int {
	if n, err := strconv.Atoi(os.Getenv("RESCHED_BENCH_CONCURRENCY")); err == nil && n > 0 {
		return n
	}
	return defaultBenchConcurrency
}

// benchDeliveries lets a quick run use fewer deliveries: RESCHED_BENCH_DELIVERIES=5000.
func benchDeliveries(def int) int {
	if n, err := strconv.Atoi(os.Getenv("RESCHED_BENCH_DELIVERIES")); err == nil && n > 0 {
		return n
	}
	return def
}

// benchEnv is a JetStream server with the streams, a publishing connection and the sink.
type benchEnv struct {
	srv      *natstest.Server
	js       jetstream.JetStream
	subjects bus.Subjects
	sink     *sink
}

func newBenchEnv(b *testing.B, n int) *benchEnv {
	b.Helper()
	srv := natstest.Start(b)
	js, err := jetstream.New(srv.Connect(b), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{srv: srv, js: js, subjects: bus.NewSubjects(""), sink: newSink(b, n)}
	if _, err := bus.EnsureStreams(context.Background(), js, e.subjects, bus.StreamOptions{}); err != nil {
		b.Fatal(err)
	}
	return e
}

// dueMsg is occurrence i: an Http POST to the sink, which tells occurrences apart by the
// query parameter i.
func (e *benchEnv) dueMsg(b *testing.B, i int) *nats.Msg {
	b.Helper()
	jobName := "j" + strconv.Itoa(i%benchJobCount)
	at := benchEpoch.Add(time.Duration(i) * time.Millisecond)
	act, err := json.Marshal(job.Action{ActionSpec: job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{
		URI: e.sink.srv.URL + "/fire?i=" + strconv.Itoa(i), Method: "POST", Body: `{"report":"daily"}`,
		Headers: map[string]string{"Content-Type": "application/json"},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	m := nats.NewMsg(e.subjects.Due(benchCollection, jobName))
	m.Data = bus.AppendDue(nil, benchCollection, jobName, 0, at, i/benchJobCount+1, act)
	m.Header.Set(bus.HeaderMsgID, bus.MsgID(benchCollection, jobName, 0, at))
	return m
}

// preload publishes occurrences 0 to n-1 and waits until the stream holds them all. It waits
// for the acknowledgements every preloadWindow publishes, below the client's limit of
// pending ones, which would otherwise fail a publish on a busy machine.
func (e *benchEnv) preload(b *testing.B, n int) {
	b.Helper()
	const preloadWindow = 2048
	futures := make([]jetstream.PubAckFuture, 0, preloadWindow)
	for i := range n {
		f, err := e.js.PublishMsgAsync(e.dueMsg(b, i))
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) == preloadWindow || i == n-1 {
			e.waitAcks(b, futures)
			futures = futures[:0]
		}
	}
	info, err := e.js.Stream(context.Background(), e.subjects.DueStream())
	if err != nil {
		b.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != uint64(n) {
		b.Fatalf("due stream holds %d messages, want %d", got, n)
	}
}

// publishSteady publishes occurrences 0 to n-1 at rate per second, catching up on every tick
// with what is due by then, and returns when each publish call began (ns on the sink's
// clock) and how long publishing took.
func (e *benchEnv) publishSteady(b *testing.B, n, rate int) (published []int64, took time.Duration) {
	b.Helper()
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		msgs[i] = e.dueMsg(b, i)
	}
	published = make([]int64, n)
	futures := make([]jetstream.PubAckFuture, n)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for sent := 0; sent < n; <-tick.C {
		due := min(n, int(time.Since(start).Seconds()*float64(rate))+1)
		for ; sent < due; sent++ {
			published[sent] = e.sink.now()
			f, err := e.js.PublishMsgAsync(msgs[sent])
			if err != nil {
				b.Fatal(err)
			}
			futures[sent] = f
		}
	}
	took = time.Since(start)
	e.waitAcks(b, futures)
	return published, took
}

func (e *benchEnv) waitAcks(b *testing.B, futures []jetstream.PubAckFuture) {
	b.Helper()
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(benchDeadline):
		b.Fatal("publishes not acknowledged")
	}
	for i, f := range futures {
		select {
		case err := <-f.Err():
			b.Fatalf("publish %d: %v", i, err)
		default:
		}
	}
}

// sink is the HTTP target: it answers 200 at once and records when each occurrence arrived.
type sink struct {
	srv        *httptest.Server
	base       time.Time      // the sink's clock starts here (monotonic)
	arrived    []atomic.Int64 // ns since base per occurrence; 0 until it arrives
	first      atomic.Int64   // ns since base of the first arrival
	count      atomic.Int64   // distinct occurrences arrived
	duplicates atomic.Int64
	want       atomic.Int64 // count at which all is closed
	all        chan struct{}
}

func newSink(b *testing.B, n int) *sink {
	b.Helper()
	s := &sink{base: time.Now(), arrived: make([]atomic.Int64, n), all: make(chan struct{})}
	s.want.Store(int64(n))
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	b.Cleanup(s.srv.Close)
	return s
}

// now is the sink's clock; never 0, which marks an occurrence that has not arrived.
func (s *sink) now() int64 { return int64(time.Since(s.base)) + 1 }

func (s *sink) serveHTTP(w http.ResponseWriter, r *http.Request) {
	t := s.now()
	_, _ = io.Copy(io.Discard, r.Body)
	v, _ := strings.CutPrefix(r.URL.RawQuery, "i=")
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= len(s.arrived) {
		http.Error(w, "no occurrence number", http.StatusBadRequest)
		return
	}
	if !s.arrived[i].CompareAndSwap(0, t) {
		s.duplicates.Add(1)
		return
	}
	s.first.CompareAndSwap(0, t)
	if s.count.Add(1) == s.want.Load() {
		close(s.all)
	}
}

// wait returns once n distinct occurrences have arrived; it fails when died is closed first.
func (s *sink) wait(b *testing.B, n int, died <-chan struct{}) {
	b.Helper()
	select {
	case <-s.all:
	case <-died:
		b.Fatalf("a worker exited after the sink received %d of %d occurrences", s.count.Load(), n)
	case <-time.After(benchDeadline):
		b.Fatalf("the sink received %d of %d occurrences", s.count.Load(), n)
	}
}

// span is the time from the first to the last arrival.
func (s *sink) span() time.Duration {
	var last int64
	for i := range s.arrived {
		last = max(last, s.arrived[i].Load())
	}
	return time.Duration(last - s.first.Load())
}

// workerProc is a running worker process.
type workerProc struct {
	cmd    *exec.Cmd
	ready  chan struct{} // closed when it logs that it consumes
	exited chan struct{} // closed when its stdout closes
	mu     sync.Mutex
	tail   []string // its last log lines, for failures
}

func startWorkerProc(b *testing.B, bin, natsURL string) *workerProc {
	b.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "RESCHED_WORKER_HTTP_ADDR=127.0.0.1:0",
		"RESCHED_WORKER_CONCURRENCY="+strconv.Itoa(benchConcurrency()))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &workerProc{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	go p.read(stdout)
	b.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

func (p *workerProc) read(r io.Reader) {
	defer close(p.exited)
	lines := bufio.NewScanner(r)
	ready := false
	for lines.Scan() {
		line := lines.Text()
		p.mu.Lock()
		p.tail = append(p.tail[max(0, len(p.tail)-19):], line)
		p.mu.Unlock()
		if !ready && strings.Contains(line, `"msg":"consuming due occurrences"`) {
			ready = true
			close(p.ready)
		}
	}
	_, _ = io.Copy(io.Discard, r) // after an overlong line: never let the worker block on stdout
}

// anyExited is closed when one of the processes has exited.
func anyExited(procs []*workerProc) <-chan struct{} {
	died := make(chan struct{})
	var once sync.Once
	for _, p := range procs {
		go func() {
			<-p.exited
			once.Do(func() { close(died) })
		}()
	}
	return died
}

func (p *workerProc) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

func (p *workerProc) waitReady(b *testing.B) {
	b.Helper()
	select {
	case <-p.ready:
	case <-p.exited:
		b.Fatalf("worker exited before consuming:\n%s", p.logTail())
	case <-time.After(benchDeadline):
		b.Fatalf("worker not consuming:\n%s", p.logTail())
	}
}

// stop sends SIGTERM, waits for a clean exit and returns the CPU time the process used.
func (p *workerProc) stop(b *testing.B) time.Duration {
	b.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(benchDeadline):
		b.Fatalf("worker did not stop:\n%s", p.logTail())
	}
	if err := p.cmd.Wait(); err != nil {
		b.Fatalf("worker: %v\n%s", err, p.logTail())
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// machineBusy is the CPU time all processes of the machine have used since boot, from
// /proc/stat, or -1 where there is none: the benchmarks share the machine, and the time others
// took during a run says how far its figures can be trusted.
func machineBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(fields) < 9 || fields[0] != "cpu" {
		return -1
	}
	var busy int64
	for i, f := range fields[1:9] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return -1
		}
		if i != 3 && i != 4 && i != 7 { // idle, iowait and steal are not this machine's work
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on every Linux architecture Go supports.
const clockTicks = 100

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
