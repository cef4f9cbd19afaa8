// Package sbfaketest runs the repository's fake Service Bus broker
// (scripts/emulators/servicebus-fake.js, an AMQP 1.0 broker built on rhea) for a test: on a free
// loopback port, with a random shared access key it checks every SAS token against, stopped by
// t.Cleanup. The real azservicebus client connects to it with a UseDevelopmentEmulator=true
// connection string, which speaks plain AMQP but still performs the CBS token handshake.
//
// The broker needs Node and scripts/emulators/node_modules (`npm ci --prefix scripts/emulators`,
// which .ci/run does). A test that needs it fails, rather than skips, when they are missing, so
// CI can never pass without having run it.
package sbfaketest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/resched/resched/services/internal/testenv"
)

// KeyName is the shared access key name the broker accepts.
const KeyName = "RootManageSharedAccessKey"

const (
	startTimeout = 15 * time.Second
	stopTimeout  = 10 * time.Second
)

// Broker is a running fake broker.
type Broker struct {
	// Addr is host:port of the AMQP listener.
	Addr string
	// KeyName and Key are the shared access key the broker checks tokens against.
	KeyName, Key string

	httpURL string
	cmd     *exec.Cmd
	out     *testenv.Tail
	done    chan struct{}
}

// Option declares entities or changes how the broker runs.
type Option func(*[]string)

// WithQueue declares queues.
func WithQueue(names ...string) Option {
	return func(a *[]string) { *a = append(*a, "--queue", strings.Join(names, ",")) }
}

// WithTopic declares a topic and its subscriptions.
func WithTopic(topic string, subscriptions ...string) Option {
	return func(a *[]string) { *a = append(*a, "--topic", topic+":"+strings.Join(subscriptions, ",")) }
}

// WithAutoCreate makes unknown names queues (or, for <topic>/Subscriptions/<sub>, subscriptions)
// on first use instead of answering amqp:not-found.
func WithAutoCreate() Option {
	return func(a *[]string) { *a = append(*a, "--auto-create") }
}

// WithTLS makes the broker speak AMQP over TLS (as Azure does, on its port 5671) with the
// certificate and key of these PEM files, rather than plain AMQP.
func WithTLS(certFile, keyFile string) Option {
	return func(a *[]string) { *a = append(*a, "--tls-cert", certFile, "--tls-key", keyFile) }
}

type listening struct {
	Event    string `json:"event"`
	Port     int    `json:"port"`
	HTTPPort int    `json:"httpPort"`
}

// Start starts a broker for the test.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	dir := testenv.EmulatorsDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "rhea")); err != nil {
		t.Fatalf("sbfaketest: rhea is not installed: run `npm ci --prefix scripts/emulators` at the repository root (%v)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("sbfaketest: node is not on PATH; install Node.js, then run `npm ci --prefix scripts/emulators`: %v", err)
	}
	b := &Broker{KeyName: KeyName, Key: randomKey(t), out: &testenv.Tail{}, done: make(chan struct{})}
	args := []string{filepath.Join(dir, "servicebus-fake.js"), "--host", "127.0.0.1", "--port", "0", "--http-port", "0", "--key-name", b.KeyName}
	for _, o := range opts {
		o(&args)
	}
	b.cmd = exec.Command(node, args...)
	b.cmd.Env = append(os.Environ(), "SB_FAKE_KEY="+b.Key) // off the command line
	b.cmd.Stderr = b.out
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("sbfaketest: %v", err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("sbfaketest: start the fake broker: %v", err)
	}
	t.Cleanup(func() { b.stop(t) })
	ready := make(chan listening, 1)
	go b.read(stdout, ready)
	select {
	case l := <-ready:
		b.Addr = fmt.Sprintf("127.0.0.1:%d", l.Port)
		b.httpURL = fmt.Sprintf("http://127.0.0.1:%d", l.HTTPPort)
	case <-b.done:
		t.Fatalf("sbfaketest: the fake broker exited before listening:\n%s", b.out)
	case <-time.After(startTimeout):
		t.Fatalf("sbfaketest: the fake broker did not listen within %s:\n%s", startTimeout, b.out)
	}
	return b
}

// read waits for the listening line, then keeps draining the broker's journal lines (a full
// pipe would block it) into the tail shown when a test fails.
func (b *Broker) read(r io.Reader, ready chan<- listening) {
	defer close(b.done)
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 4<<20)
	for s.Scan() {
		_, _ = b.out.Write(append(s.Bytes(), '\n'))
		var l listening
		if json.Unmarshal(s.Bytes(), &l) == nil && l.Event == "listening" {
			select {
			case ready <- l:
			default:
			}
		}
	}
}

func (b *Broker) stop(t testing.TB) {
	testenv.Terminate(b.cmd.Process, b.done, stopTimeout)
	_ = b.cmd.Wait()
	if t.Failed() {
		t.Logf("fake broker output:\n%s", b.out)
	}
}

// Endpoint is the broker's endpoint in connection-string form: sb://127.0.0.1:PORT.
func (b *Broker) Endpoint() string { return "sb://" + b.Addr }

// ConnectionString is a development-emulator connection string with the broker's key.
func (b *Broker) ConnectionString() string {
	return fmt.Sprintf("Endpoint=%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", b.Endpoint(), b.KeyName, b.Key)
}

// ClientOptions retry little and fast: tests want failures to surface at once.
func ClientOptions() *azservicebus.ClientOptions {
	return &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{
		MaxRetries: 1, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}}
}

// Client returns a real azservicebus client for the broker, closed at the end of the test.
func (b *Broker) Client(t testing.TB) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(b.ConnectionString(), ClientOptions())
	if err != nil {
		t.Fatalf("sbfaketest: client: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// CreateQueue declares a queue on the running broker.
func (b *Broker) CreateQueue(t testing.TB, name string) {
	t.Helper()
	b.control(t, http.MethodPut, "/queues/"+url.PathEscape(name), nil)
}

// CreateSubscription declares a topic subscription (and the topic) on the running broker.
func (b *Broker) CreateSubscription(t testing.TB, topic, subscription string) {
	t.Helper()
	b.control(t, http.MethodPut, "/topics/"+url.PathEscape(topic)+"/subscriptions/"+url.PathEscape(subscription), nil)
}

// Stats are the broker's counters since it started.
type Stats struct {
	Connections      int `json:"connections"`
	PutTokens        int `json:"putTokens"`
	PutTokenFailures int `json:"putTokenFailures"`
	Messages         int `json:"messages"`
}

// Stats reads the broker's counters. The broker handles AMQP and HTTP on one event loop, so
// everything a client saw acknowledged is counted by the time this answers.
func (b *Broker) Stats(t testing.TB) Stats {
	t.Helper()
	var s Stats
	b.control(t, http.MethodGet, "/stats", &s)
	return s
}

// Message is a journal entry: a message as the broker received it.
type Message struct {
	Entity        string `json:"entity"`
	MessageID     any    `json:"message_id"`
	CorrelationID any    `json:"correlation_id"`
	ContentType   string `json:"content_type"`
	Subject       string `json:"subject"`
	// ApplicationProperties maps each name to "<AMQP type>:<JSON value>", e.g. Str8:"x".
	ApplicationProperties map[string]string `json:"application_properties"`
	Annotations           map[string]any    `json:"annotations"`
	Body                  string            `json:"body"`
}

// Messages reads the journal of received messages, oldest first.
func (b *Broker) Messages(t testing.TB) []Message {
	t.Helper()
	var m []Message
	b.control(t, http.MethodGet, "/messages", &m)
	return m
}

func (b *Broker) control(t testing.TB, method, path string, into any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.httpURL+path, nil)
	if err != nil {
		t.Fatalf("sbfaketest: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("sbfaketest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("sbfaketest: %s %s: %s", method, path, resp.Status)
	}
	if into != nil {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("sbfaketest: %s %s: %v", method, path, err)
		}
	}
}

func randomKey(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatalf("sbfaketest: key: %v", err)
	}
	return base64.StdEncoding.EncodeToString(k)
}
