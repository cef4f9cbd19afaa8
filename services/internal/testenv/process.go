package testenv

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds the commands of the services module (planner, worker, ...) into a temporary
// directory with the flags of `make build`, and returns the directory. CI runs `make build`
// first, so the packages are in the build cache and this only links.
func Build(t testing.TB, commands ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := BuildInto(dir, commands...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// BuildInto is Build into a given directory, for a TestMain that builds once for all the
// tests of a package.
func BuildInto(dir string, commands ...string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-buildvcs=false", "-trimpath", "-o", dir + string(filepath.Separator)}
	for _, c := range commands {
		if !strings.Contains(c, ".") {
			c = "./" + c // a command of the services module
		}
		args = append(args, c) // else a package path: github.com/nats-io/nats-server/v2
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, "services")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("testenv: go %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// FreeAddr returns a loopback address with a port free at the time of the call.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(FreePort(t))
}

// FreePort returns a loopback port free at the time of the call, below the kernel's ephemeral
// range (32768 and up on Linux). A port the kernel handed out for ":0" may be handed out again
// as the source port of an outgoing connection (a client redialling a killed server can even
// connect to itself on that port) before the server the test starts binds it; ports below the
// range are never given out that way. The test binaries of one `go test ./...` run side by side,
// so a port is also reserved across processes, by a file in portsDir, for the test's duration:
// a server stopped and started again keeps its port meanwhile.
func FreePort(t testing.TB) int {
	t.Helper()
	if err := os.MkdirAll(portsDir, 0o777); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if !reservePort(t, port) {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // in use by something else: the reservation stays, harmlessly, until cleanup
		}
		l.Close()
		return port
	}
	t.Fatal("testenv: no free loopback port between 20000 and 32000")
	return 0
}

// portsDir holds the port reservations of the tests running on this machine.
var portsDir = filepath.Join(os.TempDir(), "resched-test-ports")

// reservePort takes port for the test, unless another test holds it. A reservation older than
// an hour is a crashed run's, and is taken over.
func reservePort(t testing.TB, port int) bool {
	path := filepath.Join(portsDir, strconv.Itoa(port))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		info, serr := os.Stat(path)
		if serr != nil || time.Since(info.ModTime()) < time.Hour {
			return false
		}
		_ = os.Remove(path)
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err != nil {
			return false
		}
	}
	f.Close()
	t.Cleanup(func() { _ = os.Remove(path) })
	return true
}

// Proc is a child process of a test, its output appended to a log file. It is killed at the
// end of the test if still running.
type Proc struct {
	Name string
	Log  string // the log file
	path string
	args []string
	env  []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
}

// Start runs path with args and env (added to the test's environment), logging to
// <dir>/<name>.log.
func Start(t testing.TB, dir, name, path string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Log: filepath.Join(dir, name+".log"), path: path, args: args, env: env}
	p.Restart(t)
	t.Cleanup(func() { p.Kill(t) })
	return p
}

// Restart starts the process again (it must not be running), with the same log.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer log.Close()
	cmd := p.command(p.args) // args never change; the environment may (AddEnv)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited, p.started = cmd, exited, time.Now()
	p.mu.Unlock()
}

// AddEnv adds variables to the process's environment (the last of one name counts) from its
// next start on: a service restarted with another setting.
func (p *Proc) AddEnv(vars ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.env = append(slices.Clone(p.env), vars...)
}

// RunOnce runs the process's program once more, with its environment and args instead of its
// own arguments (a service's one-off mode, as -repartition), and returns its output when it
// has exited.
func (p *Proc) RunOnce(args ...string) ([]byte, error) {
	return p.command(args).CombinedOutput()
}

// command is the process's program with args, in its environment as it is now (AddEnv).
func (p *Proc) command(args []string) *exec.Cmd {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.path, args...)
	cmd.Env = append(os.Environ(), p.env...)
	return cmd
}

// Running reports whether the process runs.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill ends the process with SIGKILL, as kill -9 does, and waits for it.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	cmd, exited := p.running()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Pause stops the process with SIGSTOP, as a long garbage collection, a frozen container or
// a stolen virtual machine does: it holds its connections and state, and does nothing.
func (p *Proc) Pause(t testing.TB) { p.signal(t, syscall.SIGSTOP) }

// Resume lets a paused process go on (SIGCONT).
func (p *Proc) Resume(t testing.TB) { p.signal(t, syscall.SIGCONT) }

func (p *Proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	cmd, _ := p.running()
	if cmd == nil {
		t.Fatalf("testenv: %s is not running", p.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("testenv: %s: %v", p.Name, err)
	}
}

// Stop ends the process with SIGTERM and waits for it, killing it after grace.
func (p *Proc) Stop(t testing.TB, grace time.Duration) {
	t.Helper()
	cmd, exited := p.running()
	if cmd == nil {
		return
	}
	if Terminate(cmd.Process, exited, grace) {
		t.Errorf("testenv: %s did not stop within %v of SIGTERM: killed", p.Name, grace)
	}
}

func (p *Proc) running() (*exec.Cmd, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// Terminate sends a process SIGTERM and waits until exited is closed, killing the process
// after grace; it reports whether it had to kill. The helpers that start servers for tests
// stop them with it, so that a server that hangs in its stop cannot hold a test run.
func Terminate(proc *os.Process, exited <-chan struct{}, grace time.Duration) (killed bool) {
	_ = proc.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return false
	case <-time.After(grace):
		_ = proc.Kill()
		<-exited
		return true
	}
}

// PID is the process's id (0 when it does not run).
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// CPU is the CPU time the process has used so far (user and system), read from /proc.
func (p *Proc) CPU(t testing.TB) time.Duration {
	t.Helper()
	return PIDCPU(t, p.PID())
}

// PIDCPU is the CPU time a process has used so far (user and system), read from /proc.
func PIDCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// The command name (field 2) may hold spaces: count fields after its closing parenthesis.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64) // fields 14 and 15 of the line
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// PIDWaited is how long the threads of a process have waited for a CPU while they could have
// run (the second field of each thread's /proc schedstat), added up; false where the kernel
// does not keep it. Beside the CPU time, it tells a process held back by the others on its
// cores from one waiting on its own work. Threads that have ended no longer count.
func PIDWaited(pid int) (time.Duration, bool) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(paths) == 0 {
		return 0, false
	}
	var sum int64
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // a thread that ended since the listing
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += ns
	}
	return time.Duration(sum), true
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// Tail returns the last part of the log.
func (p *Proc) Tail() string { return TailOf(p.Log, 16<<10) }

// TailOf returns the last n bytes of a file, or why it could not be read.
func TailOf(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
