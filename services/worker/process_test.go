package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/azuritetest"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/sbfaketest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/shared/job"
)

// deadline bounds every wait of these tests; they poll, they never sleep.
const deadline = 30 * time.Second

// child is a worker process: the test binary run as the worker.
type child struct {
	cmd  *exec.Cmd
	logs chan map[string]any
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{runAsWorker + "=1", "RESCHED_WORKER_HTTP_ADDR=127.0.0.1:0"}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logs: make(chan map[string]any, 1024)}
	go c.read(stdout)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

// read decodes the log records; the channel closes when the process's stdout does.
func (c *child) read(r io.Reader) {
	defer close(c.logs)
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		var rec map[string]any
		if json.Unmarshal(lines.Bytes(), &rec) == nil {
			select {
			case c.logs <- rec:
			default: // nobody reads this far: drop rather than block the child
			}
		}
	}
}

// waitLog returns the first record with the message msg.
func (c *child) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case rec, ok := <-c.logs:
			if !ok {
				t.Fatalf("worker exited before logging %q", msg)
			}
			if rec["msg"] == msg {
				return rec
			}
		case <-timer.C:
			t.Fatalf("worker did not log %q", msg)
		}
	}
}

// e2e is a NATS server and an HTTP target for worker processes.
type e2e struct {
	srv      *natstest.Server
	js       jetstream.JetStream
	subjects bus.Subjects
	results  jetstream.Consumer

	mu      sync.Mutex
	calls   []string    // execution tag + " " + request id, per request
	hold    bool        // hold the next request until the test ends
	arrived chan string // request ids, as requests arrive
	target  *httptest.Server
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	srv := natstest.Start(t)
	_, js, subjects := srv.JetStream(t)
	e := &e2e{srv: srv, js: js, subjects: subjects, arrived: make(chan string, 16)}
	ctx := context.Background()
	var err error
	if e.results, err = js.CreateOrUpdateConsumer(ctx, e.subjects.ResultsStream(), jetstream.ConsumerConfig{
		Durable: "test-results", AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	e.target = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(httpaction.HeaderClientRequestID)
		e.mu.Lock()
		e.calls = append(e.calls, r.Header.Get(httpaction.HeaderExecutionTag)+" "+id)
		hold := e.hold
		e.hold = false
		e.mu.Unlock()
		e.arrived <- id
		if hold {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(e.target.Close)
	t.Cleanup(func() { close(release) })
	return e
}

func (e *e2e) publishDue(t *testing.T, jobName string) string {
	t.Helper()
	return e.publishAction(t, jobName, job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: e.target.URL, Method: "POST"}})
}

// publishAction is publishDue with the job's action given.
func (e *e2e) publishAction(t *testing.T, jobName string, spec job.ActionSpec) string {
	t.Helper()
	act, _ := json.Marshal(job.Action{ActionSpec: spec})
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := nats.NewMsg(e.subjects.Due("c", jobName))
	m.Data = bus.AppendDue(nil, "c", jobName, 0, at, 1, act)
	m.Header.Set(bus.HeaderMsgID, bus.MsgID("c", jobName, 0, at))
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return bus.ExecutionTag("c", jobName, 0, at)
}

// httpsTarget serves the target over HTTPS with a certificate pair.
func (e *e2e) httpsTarget(t *testing.T, pair tlstest.Pair) *httptest.Server {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	secure := httptest.NewUnstartedServer(e.target.Config.Handler)
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	return secure
}

func (e *e2e) nextResult(t *testing.T) bus.Result {
	t.Helper()
	m, err := e.results.Next(jetstream.FetchMaxWait(deadline))
	if err != nil {
		t.Fatalf("no result: %v", err)
	}
	_ = m.Ack()
	var r bus.Result
	if err := json.Unmarshal(m.Data(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *e2e) waitArrival(t *testing.T) string {
	t.Helper()
	select {
	case id := <-e.arrived:
		return id
	case <-time.After(deadline):
		t.Fatal("no request reached the target")
		return ""
	}
}

func TestWorkerProcessDeliversAndServesHealth(t *testing.T) {
	e := newE2E(t)
	w := startChild(t, "NATS_URL="+e.srv.ClientURL(), "RESCHED_WORKER_COLLECTION_CONCURRENCY=2")
	addr := w.waitLog(t, "http listening")["addr"].(string)
	if limit := w.waitLog(t, "consuming due occurrences")["collection_concurrency"]; limit != 2.0 {
		t.Errorf("consuming with collection_concurrency %v, want 2 (the setting)", limit)
	}
	tag := e.publishDue(t, "j")

	r := e.nextResult(t)
	if r.ExecutionTag != tag || r.Status != job.ExecutionCompleted || !r.Final || r.Attempt != 0 {
		t.Errorf("result %+v, want a completed first attempt of %s", r, tag)
	}
	for _, c := range []struct{ path, want string }{
		{"/healthz", `"alive"`},
		{"/readyz", `"ready"`},
		{"/metrics", `resched_worker_attempts_total{action_type="Http",outcome="Completed"} 1`},
		{"/metrics", "\nresched_worker_deliveries_waiting 0\n"},
	} {
		path, want := c.path, c.want
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body lacks %s:\n%.2000s", path, resp.StatusCode, want, body)
		}
	}
}

// An HTTPS target, a Storage Queue endpoint and a Service Bus namespace (AMQP over TLS) whose
// certificates a private CA signed are reached when that CA is given
// (RESCHED_WORKER_TARGET_CA), besides the system's: without it, every attempt failed with
// "certificate signed by unknown authority", and a worker had no setting to trust one (for
// Service Bus, until the worker gave it the CAs).
func TestWorkerProcessTrustsTheTargetCA(t *testing.T) {
	e := newE2E(t)
	ca := tlstest.NewCA(t, "company")
	pair := ca.Server(t, "target")
	secure := e.httpsTarget(t, pair)
	queues := azuritetest.StartTLS(t, ca)
	q := queues.Queue(t, "jobs")
	token := queues.SASToken(t, "jobs", sas.QueuePermissions{Add: true}, time.Now().Add(time.Hour))
	bus := sbfaketest.Start(t, sbfaketest.WithQueue("orders"), sbfaketest.WithTLS(pair.CertFile, pair.KeyFile))

	w := startChild(t, "NATS_URL="+e.srv.ClientURL(), "RESCHED_WORKER_TARGET_CA="+ca.CertFile,
		"RESCHED_WORKER_STORAGE_QUEUE_ENDPOINT="+queues.Endpoint(), "RESCHED_WORKER_SERVICEBUS_ENDPOINT="+bus.Endpoint())
	w.waitLog(t, "consuming due occurrences")
	for name, spec := range map[string]job.ActionSpec{
		"https": {Type: job.ActionHTTPS, Request: &job.HTTPRequest{URI: secure.URL, Method: "POST"}},
		"queue": {Type: job.ActionStorageQueue, QueueMessage: &job.StorageQueueMessage{
			StorageAccount: azuritetest.Account, QueueName: "jobs", SASToken: token, Message: "queued over TLS"}},
		"servicebus": {Type: job.ActionServiceBusQueue, ServiceBusQueueMessage: &job.ServiceBusQueueMessage{QueueName: "orders",
			ServiceBusMessage: job.ServiceBusMessage{Namespace: "company", Message: "sent over TLS",
				Authentication: &job.ServiceBusAuthentication{Type: job.ServiceBusAuthSharedAccessKey, SASKeyName: bus.KeyName, SASKey: bus.Key}}}},
	} {
		tag := e.publishAction(t, name, spec)
		if r := e.nextResult(t); r.ExecutionTag != tag || r.Status != job.ExecutionCompleted {
			t.Errorf("%s: result %+v, want delivered", name, r)
		}
	}
	msgs, err := q.DequeueMessage(context.Background(), nil)
	if err != nil || len(msgs.Messages) != 1 || !strings.Contains(*msgs.Messages[0].MessageText, "queued over TLS") {
		t.Errorf("the queue holds %+v, %v", msgs.Messages, err)
	}
	if got := bus.Messages(t); len(got) != 1 || got[0].Entity != "orders" || !strings.Contains(got[0].Body, "sent over TLS") {
		t.Errorf("the Service Bus queue received %+v", got)
	}
}

// The target CA file is read again when it changes: a private CA renewed (the new one added
// to the bundle, as trust-manager or a refreshed Secret does) is trusted without a restart.
func TestWorkerProcessReadsTheTargetCAFileAgain(t *testing.T) {
	e := newE2E(t)
	old, renewed := tlstest.NewCA(t, "company-2025"), tlstest.NewCA(t, "company-2026")
	pair := renewed.Server(t, "target")
	secure := e.httpsTarget(t, pair)
	read := func(f string) []byte {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bundle := filepath.Join(t.TempDir(), "cas.pem")
	if err := os.WriteFile(bundle, read(old.CertFile), 0o644); err != nil {
		t.Fatal(err)
	}
	w := startChild(t, "NATS_URL="+e.srv.ClientURL(), "RESCHED_WORKER_TARGET_CA="+bundle)
	w.waitLog(t, "consuming due occurrences")
	spec := job.ActionSpec{Type: job.ActionHTTPS, Request: &job.HTTPRequest{URI: secure.URL, Method: "POST"}}
	tag := e.publishAction(t, "before", spec)
	if r := e.nextResult(t); r.ExecutionTag != tag || r.Status != job.ExecutionFailed || !strings.Contains(r.Message, "unknown authority") {
		t.Fatalf("before the renewed CA: result %+v, want refused for an unknown authority", r)
	}

	if err := os.WriteFile(bundle, append(read(old.CertFile), read(renewed.CertFile)...), 0o644); err != nil {
		t.Fatal(err)
	}
	// A delivery looks at the file at most once a second: the first ones may still refuse.
	tries := 0
	testenv.Eventually(t, 20*time.Second, "a delivery trusting the renewed CA", func() bool {
		tries++
		tag := e.publishAction(t, fmt.Sprintf("after-%d", tries), spec)
		for {
			if r := e.nextResult(t); r.ExecutionTag == tag {
				return r.Status == job.ExecutionCompleted
			}
		}
	})
	w.waitLog(t, "the target CA file changed on disk and was read again")
}

// A worker killed with SIGKILL in the middle of a delivery loses nothing: once the AckWait
// (5 s by default) has passed, the occurrence goes to another worker, within seconds.
func TestKilledWorkerLosesNothing(t *testing.T) {
	e := newE2E(t)
	env := []string{"NATS_URL=" + e.srv.ClientURL()} // the default AckWait, as deployed
	e.mu.Lock()
	e.hold = true
	e.mu.Unlock()
	first := startChild(t, env...)
	tag := e.publishDue(t, "j")
	firstID := e.waitArrival(t)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	killed := time.Now()

	second := startChild(t, env...)
	second.waitLog(t, "consuming due occurrences")
	secondID := e.waitArrival(t)
	if after := time.Since(killed); after > 10*time.Second {
		t.Errorf("the killed worker's delivery came again %v after the kill; the AckWait is 5 s", after)
	}
	r := e.nextResult(t)
	if r.ExecutionTag != tag || r.Status != job.ExecutionCompleted || !r.Final || r.Attempt != 1 {
		t.Errorf("result %+v, want the completed second delivery of %s", r, tag)
	}
	e.mu.Lock()
	calls := append([]string(nil), e.calls...)
	e.mu.Unlock()
	want := []string{tag + " " + firstID, tag + " " + secondID}
	if len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] || firstID == secondID {
		t.Errorf("target calls %q, want %q with two request ids", calls, want)
	}
}
