package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

// The first hour of a new user: `make run` on a fresh clone of the repository, with no
// override, exactly as the README says; the README's tour run against it; Ctrl-C.
//
// These tests use the default ports of `make run` (4222, 6390, 8080–8082), so they run one
// after the other, never in parallel.

// delivery is what the example target prints for each request: "... job=demo/<name> ...".
var deliveryLine = regexp.MustCompile(` job=[A-Za-z0-9_-]+/[A-Za-z0-9_-]+`)

func TestFreshCloneMakeRunAndTheReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run on a fresh clone")
	}
	clone := freshClone(t)
	run := startMakeRun(t, clone, nil)
	run.waitFor(t, 60*time.Second, "a delivery printed", deliveryLine.MatchString)
	// The README's tour starts once make run says so.
	run.waitFor(t, 10*time.Second, "make run to say it runs", func(l string) bool { return strings.Contains(l, readyLine) })

	tour := readmeTour(t, filepath.Join(clone, "README.md"))
	cmd := exec.Command("bash", "-c", "set -euo pipefail; set -x\n"+tour)
	cmd.Dir = clone
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's tour failed: %v\n%s", err, out)
	}
	for _, want := range []string{"job reports/weekly created", "every Monday and Friday at 09:30 and 17:30 (Europe/Paris)",
		"Next runs:", "job reports/nightly: applied; next run ", "collection reports deleted"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out)
		}
	}
	// The gateway call make run prints, pasted into a shell as it is.
	call := printedCall(t, run.output())
	cmd = exec.Command("bash", "-c", "set -euo pipefail\n"+call)
	// curl, unlike Go, would send a loopback request through a proxy set in the environment.
	cmd.Dir, cmd.Env = clone, cleanEnv("NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"value":[`) {
		t.Errorf("the gateway call make run prints (%v):\n%s\n%s", err, call, out)
	}
	if strings.Contains(run.output(), "(there from a previous run") {
		t.Errorf("the first make run says the example jobs were there from a previous run:\n%s", run.output())
	}
	run.interrupt(t)

	// make run again, on the first run's data. No planner ran in between, so the new one
	// records an outage, and what fell due in it waits until the record has stood for three
	// heartbeats (a planner that lived through it could withdraw it). The example jobs, put
	// again at once, fall due after it: they fire at their time, not 3 s later. An outage is
	// a gap of more than three heartbeat periods (3 s) without a planner: real time, which no
	// clock of the test's can stand for.
	time.Sleep(3 * time.Second)
	again := startMakeRun(t, clone, nil)
	const job = "http-every-10-seconds"
	again.waitFor(t, 60*time.Second, "a delivery of "+job, func(l string) bool { return strings.Contains(l, " job=demo/"+job+" ") })
	var printed []line
	for _, l := range strings.Split(again.output(), "\n") {
		printed = append(printed, line{text: l})
	}
	if strings.Contains(again.output(), "note: a put replaces") || !strings.Contains(again.output(), "demo/"+job+" (there from a previous run") {
		t.Errorf("make run again should say in one line per job that it put the example jobs again, not print schedctl's note:\n%s", again.output())
	}
	first := deliveriesOf(printed, "demo", job)[0]
	if late := first.at.Sub(first.expectedTime); late > 2*time.Second {
		t.Errorf("after make run again, %s's first run reached the target %v after its time, want under 2 s", job, late)
	}
	again.interrupt(t)
	if log, err := os.ReadFile(filepath.Join(clone, ".data", "planner.log")); err != nil || !strings.Contains(string(log), "outage on record") {
		t.Errorf("the planner did not log the outage between the two runs (%v); this test then shows nothing", err)
	}
}

// A default port that is busy is named with its holder, and make run moves to the next one
// and says which NATS_URL to use; a port the user set must be free.
func TestMakeRunWithABusyDefaultPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run on a fresh clone")
	}
	l, err := net.Listen("tcp", "127.0.0.1:4222")
	if err != nil {
		t.Fatalf("hold the default NATS port: %v", err)
	}
	defer l.Close()
	// The target's default too: it moves to the next port, which is the planner's default, so
	// the planner must move further rather than take the same one.
	target, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		t.Fatalf("hold the default target port: %v", err)
	}
	defer target.Close()
	clone := freshClone(t)

	busy := startMakeRun(t, clone, []string{"NATS_ADDR=127.0.0.1:4222"})
	busy.waitExit(t, 60*time.Second)
	if code := busy.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(busy.output(), "the NATS port 4222 (NATS_ADDR=127.0.0.1:4222) is in use by ") ||
		!strings.Contains(busy.output(), "set NATS_ADDR to a free port") {
		t.Fatalf("make run with a busy NATS_ADDR: exit %d\n%s", code, busy.output())
	}

	run := startMakeRun(t, clone, nil)
	run.waitFor(t, 60*time.Second, "a delivery printed", deliveryLine.MatchString)
	run.waitFor(t, 10*time.Second, "the NATS_URL to use", func(l string) bool { return strings.Contains(l, "export NATS_URL=") })
	out := run.output()
	for _, want := range []string{"the NATS port 4222 is in use by ", "using the next free port (set NATS_ADDR to choose one)",
		"export NATS_URL=nats://127.0.0.1:4223", "the example target port 8080 is in use"} {
		if !strings.Contains(out, want) {
			t.Errorf("make run's output lacks %q:\n%s", want, out)
		}
	}
	run.interrupt(t)
}

// make run ended otherwise than by Ctrl-C in its terminal leaves nothing running either:
//   - make alone killed outright (a harness giving up on it): the script stops everything
//     once it finds itself without its make;
//   - make's whole process group killed outright: the services, each in a session of its own
//     out of reach of Ctrl-C, are told to stop when the script ends;
//   - started with SIGINT ignored (a script's `make run &`, no job control), then interrupted:
//     the script starts itself again with SIGINT back, since bash cannot trap it otherwise.
//
// Each of the three left the five services running before (the third the script and make too).
func TestMakeRunEndedOutrightLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run on a fresh clone")
	}
	clone := freshClone(t)
	makeRun := func() *exec.Cmd { return exec.Command("make", "run") }
	for _, c := range []struct {
		name string
		cmd  func() *exec.Cmd
		end  func(pid int) error
	}{
		{"make killed", makeRun, func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }},
		{"its process group killed", makeRun, func(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }},
		{"interrupted, started with SIGINT ignored", func() *exec.Cmd { return exec.Command("bash", "-c", "trap '' INT; exec make run") },
			func(pid int) error { return syscall.Kill(-pid, syscall.SIGINT) }},
	} {
		run := startMake(t, clone, nil, c.cmd())
		run.waitFor(t, 60*time.Second, "make run to say it runs", func(l string) bool { return strings.Contains(l, readyLine) })
		if err := c.end(run.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		run.leavesNothing(t, c.name)
	}
}

// freshClone clones the repository at HEAD into a temporary directory, as a new user would.
func freshClone(t *testing.T) string {
	t.Helper()
	// A space in the path, as in a macOS "~/My Projects": every path the script uses or
	// prints must be quoted.
	dir := filepath.Join(t.TempDir(), "my projects", "resched")
	cmd := exec.Command("git", "clone", "--quiet", testenv.RepoRoot(t), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	return dir
}

// printedCall is the curl command make run prints for the gateway: its line and the next.
func printedCall(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "curl ") && i+1 < len(lines) {
			return l + "\n" + lines[i+1]
		}
	}
	t.Fatalf("make run printed no curl command:\n%s", out)
	return ""
}

// cleanEnv is the environment without any of make run's overrides, as a new user has it.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "RESCHED_"), name == "NATS_URL", name == "NATS_ADDR", name == "REDIS_PORT",
			name == "TARGET_ADDR", name == "PLANNER_HTTP", name == "WORKER_HTTP", name == "GATEWAY_ADDR", name == "GATEWAY_HTTP", name == "BIN", name == "JOBS", name == "COLLECTION":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// makeRun is `make run` running in a clone, in a process group of its own as from a terminal.
type makeRun struct {
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
	mu     sync.Mutex
	out    strings.Builder
	lines  chan struct{}
	read   chan struct{} // closed once the output is read to its end
}

func startMakeRun(t *testing.T, dir string, env []string) *makeRun {
	t.Helper()
	return startMake(t, dir, env, exec.Command("make", "run"))
}

// startMake starts cmd, a way of running make run, in dir.
func startMake(t *testing.T, dir string, env []string, cmd *exec.Cmd) *makeRun {
	t.Helper()
	m := &makeRun{dir: dir, cmd: cmd, exited: make(chan struct{}), lines: make(chan struct{}, 1), read: make(chan struct{})}
	m.cmd.Dir = dir
	m.cmd.Env = cleanEnv(env...)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// An os.Pipe, not an io.Pipe: Wait then returns when make exits, not when the last child
	// that inherited the output closes it.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stdout, m.cmd.Stderr = w, w
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("make run: %v", err)
	}
	_ = w.Close()
	go func() {
		defer close(m.read)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			m.mu.Lock()
			m.out.WriteString(sc.Text() + "\n")
			m.mu.Unlock()
			select {
			case m.lines <- struct{}{}:
			default:
			}
		}
	}()
	go func() { _ = m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() {
		select {
		case <-m.exited:
		default:
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			<-m.exited
		}
		for _, pid := range processesIn(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("make run's output:\n%s", m.output())
		}
	})
	return m
}

func (m *makeRun) output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

// waitFor waits until a line of the output matches.
func (m *makeRun) waitFor(t *testing.T, within time.Duration, what string, match func(string) bool) {
	t.Helper()
	deadline := time.After(within)
	for !m.has(match) {
		select {
		case <-m.lines:
		case <-m.exited:
			if m.readAll(); !m.has(match) {
				t.Fatalf("make run exited before %s:\n%s", what, m.output())
			}
		case <-deadline:
			t.Fatalf("no %s within %v:\n%s", what, within, m.output())
		}
	}
}

// has reports whether a line of the output so far matches.
func (m *makeRun) has(match func(string) bool) bool {
	return slices.ContainsFunc(strings.Split(m.output(), "\n"), match)
}

func (m *makeRun) waitExit(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-m.exited:
	case <-time.After(within):
		t.Fatalf("make run did not exit within %v:\n%s", within, m.output())
	}
	m.readAll()
}

// readAll waits, once make has exited, for its last lines: they may still be in the pipe. The
// output is whole once the pipe is read to its end, unless a process make started holds it.
func (m *makeRun) readAll() {
	select {
	case <-m.read:
	case <-time.After(5 * time.Second):
	}
}

// interrupt sends SIGINT to the process group, as Ctrl-C in a terminal does, and checks that
// make exits, that no process it started is left, and that the services logged no warning or
// error while they stopped.
func (m *makeRun) interrupt(t *testing.T) {
	t.Helper()
	logs := filepath.Join(m.dir, ".data")
	before := map[string]int{}
	for _, name := range serviceLogs {
		if fi, err := os.Stat(filepath.Join(logs, name)); err == nil {
			before[name] = int(fi.Size())
		}
	}
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	m.leavesNothing(t, "Ctrl-C")
	for _, name := range serviceLogs {
		b, err := os.ReadFile(filepath.Join(logs, name))
		if err != nil {
			t.Errorf("after Ctrl-C: %v", err)
			continue
		}
		for line := range strings.Lines(string(b[min(before[name], len(b)):])) {
			if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
				t.Errorf("after Ctrl-C, %s logged: %s", name, line)
			}
		}
	}
}

// serviceLogs are the services' logs in make run's data directory (.data).
var serviceLogs = []string{"planner.log", "worker.log", "gateway.log"}

// leavesNothing checks that make exits and that no process it started is left, once it was
// ended (how: what).
func (m *makeRun) leavesNothing(t *testing.T, how string) {
	t.Helper()
	m.waitExit(t, 30*time.Second)
	testenv.Eventually(t, 15*time.Second, how+": every process make run started to be gone", func() bool {
		return len(processesIn(m.dir)) == 0
	}, func() string { return fmt.Sprint("left: ", processesIn(m.dir), "\n", m.output()) })
}

// processesIn lists the processes whose working directory is inside dir.
func processesIn(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readmeTour returns the sh code blocks of the README's tour section, in order.
func readmeTour(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "## A five-minute tour")
	if start < 0 {
		t.Fatal("the README has no tour section")
	}
	text = text[start:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	var blocks []string
	for _, part := range strings.Split(text, "```sh\n")[1:] {
		code, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatal("an unclosed code block in the README's tour")
		}
		blocks = append(blocks, code)
	}
	if len(blocks) < 3 {
		t.Fatalf("the README's tour has %d sh blocks", len(blocks))
	}
	return strings.Join(blocks, "\n")
}
