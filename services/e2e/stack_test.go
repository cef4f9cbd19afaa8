package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

const (
	// readyTimeout bounds the script's start-up: redis, the planner, NATS, the worker and the
	// first schedctl calls.
	readyTimeout = 60 * time.Second
	// stopTimeout bounds the script's stop; the services are told to give up draining sooner
	// (shutdownTimeout).
	stopTimeout     = 30 * time.Second
	shutdownTimeout = "5s"
	// readyLine is what run.sh prints once everything runs and the example jobs are loaded.
	readyLine = "resched is running."
)

// commands are the binaries run.sh starts, built once by the test.
var commands = []string{"planner", "worker", "schedctl", "target", "gateway"}

// stack is scripts/run.sh running as a child of the test, with its own addresses and data.
type stack struct {
	cmd     *exec.Cmd
	bin     string // the binaries
	data    string // RESCHED_DATA: logs, redis and NATS data
	natsURL string
	target  string // the example target's base URL
	addrs   map[string]string
	out     *output
	exited  chan struct{}  // closed once the script has exited
	started map[int]string // the script's children once it runs: pid to command line
}

// emulators are the worker's settings that point it at the test's Azurite and fake broker.
type emulators struct {
	storageEndpoint    string
	serviceBusEndpoint string
}

// freeAddrs picks n distinct free loopback addresses. They are free when picked; another
// process could take one before the stack does, which start would report.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		addrs = append(addrs, testenv.FreeAddr(t)) // never the same twice in a process
	}
	return addrs
}

// startStack runs scripts/run.sh with the binaries of bin on free ports and waits until it
// says it is running. jobs is the script's JOBS (example jobs loaded into collection demo).
func startStack(t *testing.T, root, bin, jobs string, emu emulators) *stack {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		// run.sh would try to install it; a test must not.
		t.Fatal("redis-server is not on PATH: install it (Debian: apt-get install redis-server; .ci/run does)")
	}
	a := freeAddrs(t, 7)
	s := &stack{
		bin: bin, data: t.TempDir(), natsURL: "nats://" + a[1], target: "http://" + a[2],
		addrs: map[string]string{"redis": a[0], "nats": a[1], "target": a[2], "planner http": a[3], "worker http": a[4],
			"gateway": a[5], "gateway http": a[6]},
		out:    newOutput(),
		exited: make(chan struct{}),
	}
	_, redisPort, _ := net.SplitHostPort(a[0])
	s.cmd = exec.Command(filepath.Join(root, "scripts", "run.sh"))
	s.cmd.Dir = root
	s.cmd.Env = append(os.Environ(),
		"BIN="+bin, "RESCHED_DATA="+s.data, "COLLECTION=demo", "JOBS="+jobs,
		"REDIS_PORT="+redisPort, "NATS_ADDR="+a[1], "TARGET_ADDR="+a[2], "PLANNER_HTTP="+a[3], "WORKER_HTTP="+a[4],
		"GATEWAY_ADDR="+a[5], "GATEWAY_HTTP="+a[6],
		"RESCHED_WORKER_STORAGE_QUEUE_ENDPOINT="+emu.storageEndpoint,
		"RESCHED_WORKER_SERVICEBUS_ENDPOINT="+emu.serviceBusEndpoint,
		"RESCHED_WORKER_SERVICEBUS_EMULATOR=true",
		// Retries a second apart keep the failing job's three attempts within seconds.
		"RESCHED_WORKER_MIN_RETRY_INTERVAL=1s", "RESCHED_PLANNER_MIN_RETRY_INTERVAL=1s",
		"RESCHED_WORKER_SHUTDOWN_TIMEOUT="+shutdownTimeout, "RESCHED_PLANNER_SHUTDOWN_TIMEOUT="+shutdownTimeout,
	)
	stderr, err := os.Create(filepath.Join(s.data, "run.sh.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	// Our own pipe rather than StdoutPipe: the children inherit its write end, so the reader
	// sees EOF only once the script and every child holding it (redis, the target) are gone.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = w, stderr
	if err := s.cmd.Start(); err != nil {
		w.Close()
		r.Close()
		t.Fatalf("start run.sh: %v", err)
	}
	w.Close()
	go s.out.read(r)
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() { s.cleanup(t) })
	s.out.waitFor(t, readyTimeout, "run.sh to print "+strconv.Quote(readyLine), func(lines []line) bool {
		for _, l := range lines {
			if strings.Contains(l.text, readyLine) {
				return true
			}
		}
		return false
	})
	// Now the script waits for its children: redis, the target, the planner and the worker.
	s.started = s.children()
	var running []string
	for _, cmd := range s.started {
		running = append(running, s.service(cmd))
	}
	slices.Sort(running)
	if want := []string{"gateway", "planner", "redis-server", "target", "worker"}; runtime.GOOS == "linux" && !slices.Equal(running, want) {
		t.Errorf("run.sh runs %v, want %v", running, want)
	}
	return s
}

// schedctl runs the built schedctl against the stack's NATS; stdin may be empty.
func (s *stack) schedctl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.bin, "schedctl"), args...)
	cmd.Env = append(os.Environ(), "NATS_URL="+s.natsURL)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("schedctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// mustSchedctl is schedctl that fails the test on an error.
func (s *stack) mustSchedctl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := s.schedctl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// children lists the services the script runs (its children that are redis-server or one of
// the built binaries, not a passing sed or sleep), by pid with their command lines (Linux
// /proc; empty elsewhere).
func (s *stack) children() map[int]string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	pids := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses, so cut at the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(s.cmd.Process.Pid) {
			if cmd := cmdline(pid); s.service(cmd) != "" {
				pids[pid] = cmd
			}
		}
	}
	return pids
}

// service names the service a command line runs: redis-server or a built binary; "" for
// anything else.
func (s *stack) service(cmdline string) string {
	prog, _, _ := strings.Cut(cmdline, "\x00")
	switch {
	case filepath.Dir(prog) == s.bin:
		return filepath.Base(prog)
	case strings.HasPrefix(filepath.Base(prog), "redis-server"): // its title: "redis-server host:port"
		return "redis-server"
	}
	return ""
}

// cmdline is a process's command line, "" when it is gone.
func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return string(b)
}

// leftovers are the children recorded at start that still run: the same pid with the same
// command line (a pid alone could have been reused).
func (s *stack) leftovers() []int {
	var pids []int
	for pid, cmd := range s.started {
		if cmd != "" && cmdline(pid) == cmd {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stop sends SIGTERM to the script, as Ctrl-C or `kill` would, and checks that it ends, that
// every child it started ends with it and that every port is free again.
func (s *stack) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal run.sh: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("run.sh did not exit within %s of SIGTERM", stopTimeout)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("run.sh exited with %d after SIGTERM, want %d", code, 128+int(syscall.SIGTERM))
	}
	select {
	case <-s.out.eof:
	case <-time.After(stopTimeout):
		t.Errorf("run.sh's standard output stays open after it exited: a child still holds it")
	}
	if left := s.leftovers(); len(left) > 0 {
		t.Errorf("children %v of run.sh still run after the script exited", left)
	}
	for name, addr := range s.addrs {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s address %s still taken after the stop: %v", name, addr, err)
			continue
		}
		l.Close()
	}
}

// cleanup stops what the test did not stop (it failed first), killing what does not stop,
// and shows the logs of a failed test.
func (s *stack) cleanup(t *testing.T) {
	select {
	case <-s.exited:
	default:
		if s.started == nil { // the test failed before the script was ready
			s.started = s.children()
		}
		if testenv.Terminate(s.cmd.Process, s.exited, stopTimeout) {
			t.Errorf("run.sh did not stop within %s of SIGTERM: killed", stopTimeout)
		}
	}
	if left := s.leftovers(); len(left) > 0 {
		t.Errorf("killing the children %v run.sh left running", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if !t.Failed() {
		return
	}
	t.Logf("run.sh standard output:\n%s", s.out)
	for _, name := range []string{"run.sh.stderr", "planner.log", "worker.log", "redis.log"} {
		t.Logf("%s (last part):\n%s", name, testenv.TailOf(filepath.Join(s.data, name), 16<<10))
	}
}
