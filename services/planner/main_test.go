package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
)

// runAsPlanner makes the test binary act as the planner when a test starts it as a child, so
// TestSignalStopsPlanner can send a real signal to a real process.
const runAsPlanner = "RESCHED_PLANNER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsPlanner) == "1" {
		os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// records decodes the log records written so far.
func records(t *testing.T, logs *testenv.LogBuffer) []map[string]any {
	t.Helper()
	return logs.Records(t)
}

// waitLog waits for a log record with the message and returns it.
func waitLog(t *testing.T, logs *testenv.LogBuffer, msg string) map[string]any {
	t.Helper()
	var found map[string]any
	testenv.Eventually(t, 10*time.Second, "log record "+msg, func() bool {
		for _, r := range records(t, logs) {
			if r["msg"] == msg {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// httpGet returns the status and body of a GET.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// counter reads a counter of the planner's, resched_planner_<name>, on its /metrics (0 when
// it is not there).
func counter(t *testing.T, base, name string) int {
	t.Helper()
	_, body := httpGet(t, base+"/metrics")
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(line, "resched_planner_"+name+" "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// started runs serve in the background and returns its HTTP base URL and a stop function that
// cancels it and returns what serve returned.
func started(t *testing.T, cfg Config) (base string, logs *testenv.LogBuffer, stop func() error) {
	t.Helper()
	logs = &testenv.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, logger) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(cfg.ShutdownTimeout + 10*time.Second):
				t.Fatal("serve did not return after its context ended")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	rec := waitLog(t, logs, "http listening")
	return "http://" + rec["addr"].(string), logs, stop
}

// waitReady waits until the planner at base answers /readyz with 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "/readyz answers 200", func() bool {
		code, _ := httpGet(t, base+"/readyz")
		return code == http.StatusOK
	})
}

// testConfig points the planner at test servers, on a free HTTP port.
func testConfig(natsURL, redisURL string) Config {
	cfg := defaultConfig()
	cfg.NATS.URL, cfg.Redis.URL, cfg.HTTPAddr = natsURL, redisURL, "127.0.0.1:0"
	cfg.LogLevel = slog.LevelDebug
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// A planner whose NATS and Redis are not there yet runs, says why it is not ready, and still
// stops at once when asked.
func TestServeWithoutNATSOrRedis(t *testing.T) {
	cfg := testConfig("nats://127.0.0.1:1", "redis://127.0.0.1:1/0")
	base, logs, stop := started(t, cfg)
	if code, body := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d %s", code, body)
	}
	code, body := httpGet(t, base+"/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d %s, want 503", code, body)
	}
	var ready struct{ Reasons map[string]string }
	if err := json.Unmarshal([]byte(body), &ready); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"startup", "nats", "redis"} {
		if ready.Reasons[name] == "" {
			t.Errorf("/readyz gives no reason for %s: %s", name, body)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	var msgs []string
	for _, r := range records(t, logs) {
		msgs = append(msgs, r["msg"].(string))
	}
	joined := strings.Join(msgs, "|")
	if !strings.HasPrefix(joined, "planner started|") || !strings.HasSuffix(joined, "|planner stopping|planner stopped") {
		t.Errorf("log messages %q", joined)
	}
	if strings.Contains(joined, "planner ready") {
		t.Error("ready without NATS")
	}
}

func TestSignalStopsPlanner(t *testing.T) {
	ns := natstest.Start(t)
	rs := redistest.Start(t)
	// A server without authentication ignores the credentials, so the URL can carry a password
	// that must never show in the logs.
	natsURL := strings.Replace(ns.ClientURL(), "nats://", "nats://planner:hunter2@", 1)
	for _, tt := range []struct {
		sig    syscall.Signal
		prefix string // its own subject prefix, so the two runs do not share streams
	}{{syscall.SIGTERM, "sigterm"}, {syscall.SIGINT, "sigint"}} {
		sig := tt.sig
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-log-level", "debug", "-http-addr", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), runAsPlanner+"=1", "NATS_URL="+natsURL, "REDIS_URL="+rs.URL(),
				"RESCHED_PLANNER_SUBJECT_PREFIX="+tt.prefix)
			testenv.StopsOnSignal(t, cmd, sig, "planner ready", "planner stopped", "hunter2")
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"-h"}, 0},
		{"bad flag", []string{"-nope"}, 2},
		{"bad value", []string{"-log-level", "loud"}, 2},
		{"bad duration", []string{"-lease", "soon"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if got := run(tt.args, env(nil), &stdout, &stderr); got != tt.want {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tt.args, got, tt.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("run(%q) logged before the config was valid: %s", tt.args, stdout.String())
			}
		})
	}
}

// A port in use fails the start with status 1 and a log line naming the address.
func TestRunFailsWhenTheHTTPPortIsTaken(t *testing.T) {
	base, _, _ := started(t, testConfig("nats://127.0.0.1:1", "redis://127.0.0.1:1/0"))
	addr := strings.TrimPrefix(base, "http://")
	var stdout, stderr strings.Builder
	status := run([]string{"-http-addr", addr, "-nats-url", "nats://127.0.0.1:1"}, env(nil), &stdout, &stderr)
	if status != 1 {
		t.Fatalf("run = %d, want 1; stderr %s", status, stderr.String())
	}
	if !strings.Contains(stdout.String(), "planner failed") || !strings.Contains(stdout.String(), addr) {
		t.Errorf("no failure record naming %s:\n%s", addr, stdout.String())
	}
}

// A planner whose NATS user may not create its intake consumer (a permission left out of the
// server's configuration) keeps running and says so in /readyz, and is ready once the
// permission is granted: it stopped with an error before, at its first refused set-up.
func TestPlannerNotAllowedItsIntakeConsumerSaysSoUntilItIs(t *testing.T) {
	const user, password = "planner", "planner-password"
	deny := []string{"$JS.API.CONSUMER.CREATE.SCHEDULER_JOBS.>", "$JS.API.CONSUMER.DURABLE.CREATE.SCHEDULER_JOBS.>"}
	users := func(deny []string) natstest.Option {
		return func(o *server.Options) {
			perms := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: deny}}
			o.Users = []*server.User{{Username: user, Password: password, Permissions: perms}}
		}
	}
	ns := natstest.Start(t, users(deny))
	cfg := testConfig(ns.ClientURL(), redistest.Start(t).URL())
	cfg.NATS.User, cfg.NATS.Password = user, password
	base, logs, stop := started(t, cfg)
	var body string
	testenv.Eventually(t, 30*time.Second, "/readyz naming the intake consumer", func() bool {
		var code int
		code, body = httpGet(t, base+"/readyz")
		var ready struct{ Reasons map[string]string }
		_ = json.Unmarshal([]byte(body), &ready)
		return code == http.StatusServiceUnavailable && strings.Contains(ready.Reasons["consumers"], "intake") &&
			!strings.Contains(ready.Reasons["consumers"], "results")
	}, func() string { return body + "\n" + logs.String() })
	waitLog(t, logs, "intake consumer set-up failed; retrying")

	ns.Reload(users(nil))
	testenv.Eventually(t, 30*time.Second, "ready once allowed", func() bool {
		var code int
		code, body = httpGet(t, base+"/readyz")
		return code == http.StatusOK
	}, func() string { return body + "\n" + logs.String() })
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
}

// A planner set to another partition count than the one its Redis data was laid out with
// stops at once, saying so, rather than retrying its start for ever (setup.Final).
func TestPlannerWithAnotherLayoutStopsAtOnce(t *testing.T) {
	rs := redistest.Start(t)
	cfg := testConfig(natstest.Start(t).ClientURL(), rs.URL())
	if err := store.New(rs.Client(t), cfg.RedisKeyPrefix, store.WithPartitions(64)).CheckLayout(context.Background()); err != nil {
		t.Fatal(err) // the data laid out with 64 partitions; the planner has the default 16
	}
	done := make(chan error, 1)
	go func() { done <- serve(context.Background(), cfg, slog.New(slog.DiscardHandler)) }()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrLayout) {
			t.Errorf("serve = %v, want the layout error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the planner still runs 30 s after meeting another layout")
	}
}

// A planner on a Redis that may evict keys, or keeps no append-only file, says so at start,
// naming the policy, and runs. With AOF, it says nothing of it.
func TestPlannerOnARedisThatMayLoseJobsWarns(t *testing.T) {
	rs := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"))
	_, logs, stop := started(t, testConfig(natstest.Start(t).ClientURL(), rs.URL()))
	r := waitLog(t, logs, "Redis may evict keys to make room, and an evicted key is a job, collection or history lost: "+
		"set maxmemory-policy noeviction (docs/operations.md)")
	if servers := fmt.Sprint(r["servers"]); !strings.Contains(servers, "allkeys-lru") {
		t.Errorf("servers %s, want the policy named", servers)
	}
	waitLog(t, logs, unloggedWarning)
	waitLog(t, logs, "planner ready")
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}

	_, logs, stop = started(t, testConfig(natstest.Start(t).ClientURL(), redistest.Start(t, redistest.WithPersistence()).URL()))
	waitLog(t, logs, "planner ready")
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
	if strings.Contains(logs.String(), unloggedWarning) {
		t.Error("a Redis with AOF said to keep none")
	}
}

const unloggedWarning = "Redis keeps no append-only file: a crash or restart loses what was written since its last snapshot, " +
	"every job without one: set appendonly yes (docs/operations.md)"

// A Redis user not allowed INFO cannot say whether Redis may evict keys: the planner says so
// and runs.
func TestPlannerNotAllowedINFOStillStarts(t *testing.T) {
	rs := redistest.Start(t, redistest.WithACLUser("resched", "pw-for-info"))
	if err := rs.Client(t).Do(context.Background(), "ACL", "SETUSER", "resched", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	_, logs, stop := started(t, testConfig(natstest.Start(t).ClientURL(), rs.URL()))
	r := waitLog(t, logs, "could not tell whether Redis may evict keys")
	if err := fmt.Sprint(r["error"]); !strings.Contains(err, "INFO") {
		t.Errorf("error %s, want the refused INFO named", err)
	}
	waitLog(t, logs, "planner ready")
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
}

// On a Redis Sentinel the planner counts its master's replicas in sync for the metric, and a
// master left without one is logged as a warning, though nothing is written meanwhile.
func TestPlannerReportsAMasterLeftWithoutAReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Sentinel set")
	}
	rs := redistest.StartSentinel(t)
	base, logs, stop := started(t, testConfig(natstest.Start(t).ClientURL(), rs.URL()))
	gauge := func(n int) func() bool {
		return func() bool {
			_, body := httpGet(t, base+"/metrics")
			return strings.Contains(body, fmt.Sprintf("resched_planner_redis_replicas_in_sync{master=\"redis\"} %d\n", n))
		}
	}
	testenv.Eventually(t, 30*time.Second, "the replica counted", gauge(1))
	rs.Replica.Kill()
	testenv.Eventually(t, 30*time.Second, "the master counted alone", gauge(0))
	waitLog(t, logs, "Redis master has no replica in sync: its writes no longer wait for one, and a failover now could lose them")
	if err := stop(); err != nil {
		t.Errorf("serve: %v", err)
	}
}
