package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// gateway is an Azure REST gateway process of a fault run, and a client of its API.
type gateway struct {
	t      *testing.T
	proc   *testenv.Proc
	base   string // its URL, up to the collection's path
	health string // the URL of its /healthz, /readyz and /metrics
}

// gatewayToken is the static operator token the runs' gateways accept.
const gatewayToken = "chaos-operator"

// answer is what the gateway said to one request.
type answer struct {
	status int
	code   string // the Azure error's code, for an error
	text   string // the Azure error's message
	took   time.Duration
}

func (a answer) String() string {
	if a.code == "" {
		return fmt.Sprintf("%d in %v", a.status, a.took.Round(time.Millisecond))
	}
	return fmt.Sprintf("%d %s in %v (%s)", a.status, a.code, a.took.Round(time.Millisecond), a.text)
}

// startGateway starts a gateway on natsURL, as the README's stack does (plain HTTP, a static
// token). Its requests to the planners may take timeout.
func startGateway(t *testing.T, dir, bin, natsURL string, timeout time.Duration) *gateway {
	t.Helper()
	access := filepath.Join(dir, "gateway-access.json")
	body := fmt.Sprintf(`{"tokens": [{"name": "chaos", "token": %q, "role": "operator", "scopes": ["*"]}]}`, gatewayToken)
	if err := os.WriteFile(access, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, health := testenv.FreeAddr(t), testenv.FreeAddr(t)
	g := &gateway{t: t, base: "http://" + addr + "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/",
		health: "http://" + health}
	g.proc = testenv.Start(t, dir, "gateway", filepath.Join(bin, "gateway"), []string{"NATS_URL=" + natsURL,
		"RESCHED_GATEWAY_ADDR=" + addr, "RESCHED_GATEWAY_HTTP_ADDR=" + health, "RESCHED_GATEWAY_ACCESS_FILE=" + access,
		"RESCHED_GATEWAY_REQUEST_TIMEOUT=" + timeout.String()})
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("RESCHED_CHAOS_LOGS") != "" {
			t.Logf("gateway (last part):\n%s", g.proc.Tail())
		}
	})
	return g
}

// do sends one request for collection name; body empty is a GET.
func (g *gateway) do(name, body string) answer {
	method, rd := http.MethodGet, io.Reader(nil)
	if body != "" {
		method, rd = http.MethodPut, strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.base+name+"?api-version=2016-03-01", rd)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+gatewayToken)
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return answer{text: err.Error(), took: time.Since(began)}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, took: time.Since(began)}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		a.code, a.text = e.Error.Code, e.Error.Message
	}
	return a
}

// put creates collection name, until a planner answers.
func (g *gateway) put(name string) {
	g.t.Helper()
	var last answer
	testenv.Eventually(g.t, time.Minute, "collection "+name+" created through the gateway", func() bool {
		last = g.do(name, `{"location": "West Europe", "properties": {"sku": {"name": "Standard"}}}`)
		return last.status == http.StatusOK || last.status == http.StatusCreated
	}, func() string { return "last answer " + last.String() + "; gateway:\n" + g.proc.Tail() })
}

// A gateway whose NATS server is cut off from the rest of its cluster, where the planners are:
// the server still answers the gateway's pings, so its connection stays, but no planner is
// reachable through it. The gateway cannot watch JetStream (its NATS user may only send requests
// to the planners), so it moves after three requests in a row that no responder took
// (natsconn). Each of those is answered 503 ServerBusy, which the Azure SDKs retry. Without
// the move, every request was refused until the server rejoined. In `make test` (about 25 s).
func TestGatewayOnAServerCutOffFromThePlanners(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 25 s")
	}
	nc := natstest.StartPartitionableCluster(t, 3)
	rdb := redistest.Start(t)
	dir, bin := t.TempDir(), testenv.Build(t, "planner", "gateway")
	g := startGateway(t, dir, bin, nc.URLs(), 10*time.Second)
	// Ready: connected to NATS.
	testenv.Eventually(t, 30*time.Second, "the gateway ready", func() bool { return testenv.Status(g.health+"/readyz") == http.StatusOK }, g.proc.Tail)
	on := nc.Hosting("resched-gateway")
	// The planner knows only the servers the gateway is not on. The gateway's first request
	// waits for it to be ready: requests no responder took would move the gateway.
	plannerHTTP := testenv.FreeAddr(t)
	planner := testenv.Start(t, dir, "planner", filepath.Join(bin, "planner"), []string{"NATS_URL=" + nc.URLsBut(on),
		"REDIS_URL=" + rdb.URL(), "RESCHED_PLANNER_HTTP_ADDR=" + plannerHTTP, "RESCHED_PLANNER_STREAM_REPLICAS=3"})
	testenv.Eventually(t, time.Minute, "the planner ready", func() bool { return testenv.Status("http://"+plannerHTTP+"/readyz") == http.StatusOK }, planner.Tail)
	g.put("orders")
	if now := nc.Hosting("resched-gateway"); now != on {
		t.Fatalf("the gateway moved from n%d to n%d before the cut", on, now)
	}

	nc.Isolate(on)
	t.Cleanup(func() { nc.Rejoin(on) })
	var answers []answer
	testenv.Eventually(t, 30*time.Second, "the gateway answered by a planner again", func() bool {
		a := g.do("orders", "")
		answers = append(answers, a)
		return a.status == http.StatusOK
	}, func() string { return fmt.Sprint("answers ", answers) })
	t.Logf("after the cut: %v", answers)
	if moved := nc.Hosting("resched-gateway"); moved == on {
		t.Errorf("the gateway is still on the server cut off (n%d)", on)
	}
	for _, a := range answers[:len(answers)-1] {
		if a.status != http.StatusServiceUnavailable || a.code != "ServerBusy" {
			t.Errorf("before the move: %v, want 503 ServerBusy", a)
		}
	}
	if len(answers) > 5 {
		t.Errorf("%d requests refused before the move, want 3 (a fourth at most, sent while it moves)", len(answers)-1)
	}
}

// A request in flight when the gateway's link to NATS hangs (packets dropped, no reset): nats.go
// gives the link up after two unanswered pings (about 2 s), and the request then ends 503
// ServerBusy saying that whether it was done is not known, rather than waiting out the
// gateway's request time-out (30 s by default) to end 504. The next request, once the
// connection is back, is answered. In `make test` (about 15 s).
func TestGatewayRequestInFlightWhenItsLinkHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 15 s")
	}
	ns := natstest.Start(t)
	rdb := redistest.Start(t)
	dir, bin := t.TempDir(), testenv.Build(t, "planner", "gateway")
	testenv.Start(t, dir, "planner", filepath.Join(bin, "planner"), []string{"NATS_URL=" + ns.ClientURL(),
		"REDIS_URL=" + rdb.URL(), "RESCHED_PLANNER_HTTP_ADDR=127.0.0.1:0"})
	link := testenv.StartProxy(t, ns.Addr().String())
	g := startGateway(t, dir, bin, "nats://"+link.Addr(), 20*time.Second)
	testenv.Eventually(t, 30*time.Second, "the gateway ready", func() bool { return testenv.Status(g.health+"/readyz") == http.StatusOK }, g.proc.Tail)
	g.put("orders")

	link.Freeze()
	t.Cleanup(link.Thaw)
	a := g.do("orders", "")
	t.Logf("the request sent into the frozen link: %v", a)
	if a.status != http.StatusServiceUnavailable || a.code != "ServerBusy" || !strings.Contains(a.text, "lost before it answered") {
		t.Errorf("the request in flight: %v, want 503 ServerBusy saying the connection was lost (504 OperationTimedOut after 20 s without the change)", a)
	}
	link.Thaw()
	var last answer
	testenv.Eventually(t, 20*time.Second, "answered once the link is back", func() bool {
		last = g.do("orders", "")
		return last.status == http.StatusOK
	}, func() string { return "last answer " + last.String() })
}
