package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// The planner is a main package, and its API packages are internal to it, so the tests run
// the real planner binary, started against a NATS server and a real redis-server, and talk to
// it over NATS as a user's schedctl would.

// planner is a running planner with its NATS server and Redis.
type planner struct {
	url   string     // the NATS server's URL
	nc    *nats.Conn // a connection for the tests' own messages
	ns    *natstest.Server
	redis *redistest.Server
	proc  *testenv.Proc
}

// startPlanner starts NATS, Redis and a planner process, and waits until its API answers.
func startPlanner(t *testing.T) *planner {
	t.Helper()
	return startPlannerOn(t, natstest.Start(t))
}

// startPlannerOn is startPlanner on a NATS server of the test's.
func startPlannerOn(t *testing.T, ns *natstest.Server) *planner {
	t.Helper()
	bin := testenv.Build(t, "planner")
	rs := redistest.Start(t)
	proc := testenv.Start(t, t.TempDir(), "planner", bin+"/planner", nil, "-nats-url", ns.ClientURL(),
		"-redis-url", rs.URL(), "-http-addr", "127.0.0.1:0", "-log-level", "warn", "-shutdown-timeout", "5s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("planner output:\n%s", proc.Tail())
		}
	})
	p := &planner{url: ns.ClientURL(), nc: ns.Connect(t), ns: ns, redis: rs, proc: proc}
	testenv.Eventually(t, 30*time.Second, "the planner's API to answer", func() bool {
		_, err := p.nc.Request("scheduler.api.collections.list", nil, time.Second)
		if err != nil && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("the planner's API: %v", err)
		}
		return err == nil || !proc.Running()
	}, proc.Tail)
	if !proc.Running() {
		t.Fatalf("the planner exited:\n%s", proc.Tail())
	}
	return p
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

// mustFail runs a command line that must fail with code and a message on stderr holding each
// of want; it returns stderr.
func (p *planner) mustFail(t *testing.T, stdin string, code int, want []string, args ...string) string {
	t.Helper()
	got, stdout, stderr := p.schedctl(t, stdin, args...)
	if got != code {
		t.Fatalf("schedctl %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, stdout, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Fatalf("schedctl %s: stderr %q lacks %q", strings.Join(args, " "), stderr, w)
		}
	}
	return stderr
}

// standIn answers subject with handle in the planner's stead. The server knows the
// subscription when it returns (a flush came back): a request sent at once could otherwise
// find no responder.
func standIn(t *testing.T, ns *natstest.Server, subject string, handle nats.MsgHandler) {
	t.Helper()
	nc := ns.Connect(t)
	sub, err := nc.Subscribe(subject, handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}
