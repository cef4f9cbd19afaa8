package security

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

// service is a planner or worker process and the address of its /healthz and /readyz.
type service struct {
	*testenv.Proc
	http string
}

// start runs bin/<kind> (planner or worker) named name with env, on a free HTTP address.
func start(t *testing.T, dir, kind, name string, env ...string) *service {
	t.Helper()
	prefix := map[string]string{"planner": "RESCHED_PLANNER_", "worker": "RESCHED_WORKER_"}[kind]
	addr := testenv.FreeAddr(t)
	base := []string{prefix + "HTTP_ADDR=" + addr, prefix + "SHUTDOWN_TIMEOUT=5s"}
	if kind == "worker" {
		base = append(base, "RESCHED_WORKER_MIN_RETRY_INTERVAL=1s")
	}
	s := &service{Proc: testenv.Start(t, dir, name, filepath.Join(bin, kind), append(base, env...)), http: addr}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s (last part of its log):\n%s", name, s.Tail())
		}
	})
	return s
}

// status is the HTTP status of GET path, 0 when there is no answer.
func (s *service) status(path string) int {
	c := http.Client{Timeout: 10 * time.Second} // longer than the services' own check time-out
	resp, err := c.Get("http://" + s.http + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady waits for /readyz to answer 200.
func (s *service) waitReady(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, s.Name+" ready", func() bool { return s.status("/readyz") == 200 }, s.Tail)
}

// logged reports whether the log holds text.
func (s *service) logged(text string) bool {
	return strings.Contains(testenv.TailOf(s.Log, 4<<20), text)
}

// schedctl runs bin/schedctl with env (added to the test's environment) and args, with no
// input, and returns its output and exit status.
func schedctl(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "schedctl"), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("schedctl %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), 0
}

// mustSchedctl runs schedctl and fails the test unless it succeeds.
func mustSchedctl(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, errOut, code := schedctl(t, env, args...)
	if code != 0 {
		t.Fatalf("schedctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// writeFile writes a file of the test's and returns its path.
func writeFile(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
