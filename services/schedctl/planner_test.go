package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// The planner is a main package, and its API packages are internal to it, so the tests run
// the real planner binary: built once per test run, started against an embedded NATS server
// and a real redis-server, and talked to over NATS as a user's schedctl would.
var plannerBinary struct {
	once sync.Once
	dir  string // set by TestMain, removed after the run
	path string
	out  []byte
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "schedctl-test-")
	if err != nil {
		panic(err) // TestMain has no *testing.T to report to
	}
	plannerBinary.dir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildPlanner builds services/planner once; go test puts the go command on PATH.
func buildPlanner(t *testing.T) string {
	t.Helper()
	b := &plannerBinary
	b.once.Do(func() {
		b.path = filepath.Join(b.dir, "planner")
		cmd := exec.Command("go", "build", "-o", b.path, "github.com/resched/resched/services/planner")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build the planner: %v\n%s", b.err, b.out)
	}
	return b.path
}

// planner is a running planner with its NATS server and Redis.
type planner struct {
	url string     // the NATS server's URL
	nc  *nats.Conn // a connection for the tests' own messages
}

// startPlanner starts NATS, Redis and a planner process, and waits until its API answers.
func startPlanner(t *testing.T) *planner {
	t.Helper()
	bin := buildPlanner(t)
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	var logs testenv.Tail
	cmd := exec.Command(bin, "-nats-url", ns.ClientURL(), "-redis-url", "redis://"+rs.Addr,
		"-http-addr", "127.0.0.1:0", "-log-level", "warn", "-shutdown-timeout", "5s")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the planner: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second): // a stuck shutdown must not hang the test run
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("planner output:\n%s", logs.String())
		}
	})
	p := &planner{url: ns.ClientURL(), nc: ns.Connect(t)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := p.nc.Request("scheduler.api.collections.list", nil, time.Second)
		if err == nil {
			return p
		}
		select {
		case <-exited:
			t.Fatalf("the planner exited before its API answered:\n%s", logs.String())
		default:
		}
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) || time.Now().After(deadline) {
			t.Fatalf("the planner's API does not answer: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a child process's readiness, not waiting for test time
	}
}

// schedctl runs the command line against the planner (--server added) and returns the exit
// status and the output.
func (p *planner) schedctl(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return schedctl(t, stdin, append(args, "--server", p.url)...)
}

// schedctl runs the command line as main does.
func schedctl(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// mustRun runs a command line that must succeed and returns its standard output.
func (p *planner) mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := p.schedctl(t, stdin, args...)
	if code != 0 {
		t.Fatalf("schedctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}
