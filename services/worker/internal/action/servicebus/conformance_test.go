package servicebus_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/resched/resched/services/internal/sbfaketest"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/actiontest"
	"github.com/resched/resched/services/worker/internal/action/servicebus"
	"github.com/resched/resched/shared/job"
)

// hole accepts connections and never answers, like a namespace that hangs; held is closed once
// it holds one.
func hole(t *testing.T) (addr string, held <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			once.Do(func() { close(h) })
			go io.Copy(io.Discard, c)
		}
	}()
	return l.Addr().String(), h
}

// router dials the hanging namespaces' holes and every other namespace's broker. Going through
// the client's dialer hook also exercises the production-shaped path: sb://<ns>.<domain>
// endpoints, amqps audiences, no emulator flag.
type router struct {
	broker string
	mu     sync.Mutex
	holes  map[string]string // namespace -> hole address
}

func (r *router) dial(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
	addr := r.broker
	r.mu.Lock()
	for ns, h := range r.holes {
		if strings.HasPrefix(args.Host, "wss://"+ns+".") {
			addr = h
		}
	}
	r.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func (r *router) hang(t *testing.T) (string, <-chan struct{}) {
	addr, held := hole(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	ns := fmt.Sprintf("hang%d", len(r.holes))
	r.holes[ns] = addr
	return ns, held
}

func TestConformance(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	r := &router{broker: b.Addr, holes: map[string]string{}}
	opts := sbfaketest.ClientOptions()
	opts.NewWebSocketConn = r.dial
	d, err := servicebus.New(servicebus.Config{Endpoint: "sb://{namespace}.servicebus.test", ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	receiver, err := b.Client(t).NewReceiverForQueue("jobs", nil)
	if err != nil {
		t.Fatal(err)
	}

	actiontest.Run(t, actiontest.Harness{
		Deliverer: d,
		Success: func(t *testing.T) (*job.ActionSpec, actiontest.Check) {
			return queueAction(base(b, "conformance"), "jobs"), func(t *testing.T, m action.Meta) {
				got := receiveOne(t, receiver)
				p := got.ApplicationProperties
				if string(got.Body) != "conformance" || p["x-ms-scheduler-execution-tag"] != m.ExecutionTag ||
					p["x-ms-client-request-id"] != m.ClientRequestID || p["x-ms-scheduler-jobid"] != m.Job ||
					p["x-ms-scheduler-jobcollectionid"] != m.Collection || got.MessageID != m.ClientRequestID {
					t.Errorf("received %q with %v, id %s; want the identity of %+v", got.Body, p, got.MessageID, m)
				}
			}
		},
		RetryableFailure: func(t *testing.T) *job.ActionSpec { return queueAction(base(b, "x"), "missing") },
		PermanentFailure: func(t *testing.T) *job.ActionSpec {
			sb := base(b, "x")
			sb.Authentication.SASKey = b.Key + ";x" // cannot go into a connection string
			return queueAction(sb, "jobs")
		},
		Hang: func(t *testing.T) (*job.ActionSpec, <-chan struct{}) {
			ns, held := r.hang(t)
			sb := base(b, "x")
			sb.Namespace = ns
			return queueAction(sb, "jobs"), held
		},
		Secrets: []string{b.Key},
	})
}
