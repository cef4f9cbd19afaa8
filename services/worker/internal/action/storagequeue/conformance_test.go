package storagequeue_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/resched/resched/services/internal/azuritetest"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/actiontest"
	"github.com/resched/resched/services/worker/internal/action/storagequeue"
	"github.com/resched/resched/shared/job"
)

// hole accepts connections and never answers, like a target that hangs; held is closed once
// it holds one.
type hole struct {
	addr string
	held chan struct{}
}

func newHole(t *testing.T) *hole {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hole{addr: l.Addr().String(), held: make(chan struct{})}
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
			once.Do(func() { close(h.held) })
			go io.Copy(io.Discard, c)
		}
	}()
	return h
}

// router sends requests for the hanging accounts (the first path segment, path style) to their
// hole, and everything else where it was going (Azurite).
type router struct {
	mu    sync.Mutex
	holes map[string]string // account -> hole address
	next  *http.Client
}

func (r *router) Do(req *http.Request) (*http.Response, error) {
	account, _, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	r.mu.Lock()
	addr, ok := r.holes[account]
	r.mu.Unlock()
	if ok {
		u := *req.URL
		u.Host = addr
		req = req.Clone(req.Context())
		req.URL = &u
	}
	return r.next.Do(req)
}

func (r *router) hang(t *testing.T) (string, <-chan struct{}) {
	h := newHole(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	account := "hang" + string(rune('a'+len(r.holes)))
	r.holes[account] = h.addr
	return account, h.held
}

var _ policy.Transporter = (*router)(nil)

func TestConformance(t *testing.T) {
	a := azuritetest.Start(t)
	q := a.Queue(t, "jobs")
	token := addToken(t, a, "jobs")
	sig, _ := url.ParseQuery(token)
	r := &router{holes: map[string]string{}, next: &http.Client{}}
	opts := azuritetest.ClientOptions()
	opts.Transport = r
	d := newDeliverer(t, storagequeue.Config{Endpoint: a.Endpoint(), ClientOptions: opts})

	actiontest.Run(t, actiontest.Harness{
		Deliverer: d,
		Success: func(t *testing.T) (*job.ActionSpec, actiontest.Check) {
			return spec("jobs", token, "conformance"), func(t *testing.T, m action.Meta) {
				got := parse(t, dequeue(t, q))
				if got.ExecutionTag != m.ExecutionTag || got.ClientRequestID != m.ClientRequestID ||
					got.SchedulerJobID != m.Job || got.SchedulerJobCollectionID != m.Collection ||
					got.ExpectedExecutionTime != m.Scheduled.UTC().Format("2006-01-02T15:04:05") || got.Message != "conformance" {
					t.Errorf("envelope %+v does not match %+v", got, m)
				}
			}
		},
		RetryableFailure: func(t *testing.T) *job.ActionSpec { return spec("missing", addToken(t, a, "missing"), "x") },
		PermanentFailure: func(t *testing.T) *job.ActionSpec { return spec("jobs", "sig=%zz", "x") },
		Hang: func(t *testing.T) (*job.ActionSpec, <-chan struct{}) {
			account, held := r.hang(t)
			s := spec("jobs", token, "x")
			s.QueueMessage.StorageAccount = account
			return s, held
		},
		Secrets: []string{token, sig.Get("sig"), url.QueryEscape(sig.Get("sig"))},
		Timeout: 300 * time.Millisecond,
	})
}
