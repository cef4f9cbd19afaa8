package security

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// The NATS configuration the Kubernetes base and compose run (deploy/base/nats.conf), with the
// identities the manifests give the planner, the worker and the operator's schedctl.
func TestTheDeployedNATSConfiguration(t *testing.T) {
	conf := filepath.Join(testenv.RepoRoot(t), "deploy", "base", "nats.conf")
	for _, v := range []string{"PLANNER_PASSWORD", "WORKER_PASSWORD", "ADMIN_PASSWORD", "GATEWAY_PASSWORD"} {
		t.Setenv(v, strings.ToLower(v)+"-x")
	}
	srv := natstest.StartFromConfig(t, conf)
	if _, err := nats.Connect(srv.ClientURL()); err == nil {
		t.Fatal("the deployed configuration lets in a client without credentials")
	}
	sc := run(t, setup{natsURL: srv.ClientURL(),
		planner: []string{"NATS_USER=planner", "NATS_PASSWORD=planner_password-x", "NATS_INBOX_PREFIX=_INBOX_planner"},
		worker:  []string{"NATS_USER=worker", "NATS_PASSWORD=worker_password-x", "NATS_INBOX_PREFIX=_INBOX_worker"},
		client:  []string{"NATS_USER=admin", "NATS_PASSWORD=admin_password-x", "NATS_INBOX_PREFIX=_INBOX_admin"},
		redis:   []string{"REDIS_URL=" + redistest.Start(t).URL()}})
	sc.deliver(t, "ops", "deployed", "pw-deployed")
	sc.ctl(t, "job", "list") // the operator lists across collections

	// The gateway's user reaches the API on its own inbox, and nothing else.
	var refused atomic.Int32
	gw, err := nats.Connect(srv.ClientURL(), nats.UserInfo("gateway", "gateway_password-x"), nats.CustomInboxPrefix("_INBOX_gateway"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if strings.Contains(err.Error(), "Permissions Violation") {
				refused.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if _, err := gw.Request("scheduler.api.collections.list", nil, 5*time.Second); err != nil {
		t.Errorf("the gateway's user cannot call the API: %v", err)
	}
	if err := gw.Publish("scheduler.jobs.ops.sneaky", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	_ = gw.Flush()
	testenv.Eventually(t, 5*time.Second, "the intake refused to the gateway", func() bool { return refused.Load() > 0 })

	// The service identities are the same here as in the tenant configuration of the guide.
	deployed, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEAM_A_PASSWORD", "a")
	t.Setenv("TEAM_B_PASSWORD", "b")
	guide, err := server.ProcessConfigFile(tenantConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"planner", "worker"} {
		if a, b := permissionsOf(deployed, name), permissionsOf(guide, name); a != b {
			t.Errorf("user %s: deploy/base/nats.conf allows %s, docs/security.md %s", name, a, b)
		}
	}
}

// permissionsOf is a user's permissions as JSON ("" when there is no such user).
func permissionsOf(o *server.Options, user string) string {
	for _, u := range o.Users {
		if u.Username == user {
			b, _ := json.Marshal(u.Permissions)
			return string(b)
		}
	}
	return ""
}

// tenantConfig is the NATS server configuration of docs/security.md, its first conf block.
func tenantConfig(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```conf\n")
	conf, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/security.md has no ```conf block")
	}
	return writeFile(t, t.TempDir(), "nats.conf", []byte(conf))
}

// The tenant configuration of docs/security.md, loaded as written: team-a works with its
// collection and is refused, with a clear message, everywhere else.
func TestTenantsOfTheSecurityGuide(t *testing.T) {
	for _, v := range []string{"PLANNER_PASSWORD", "WORKER_PASSWORD", "TEAM_A_PASSWORD", "TEAM_B_PASSWORD"} {
		t.Setenv(v, strings.ToLower(v)+"-secret")
	}
	srv := natstest.StartFromConfig(t, tenantConfig(t))
	teamA := []string{"NATS_USER=team-a", "NATS_PASSWORD=team_a_password-secret", "NATS_INBOX_PREFIX=_INBOX_team_a"}
	teamB := []string{"NATS_URL=" + srv.ClientURL(), "NATS_USER=team-b", "NATS_PASSWORD=team_b_password-secret", "NATS_INBOX_PREFIX=_INBOX_team_b"}
	sc := run(t, setup{natsURL: srv.ClientURL(),
		planner: []string{"NATS_USER=planner", "NATS_PASSWORD=planner_password-secret", "NATS_INBOX_PREFIX=_INBOX_planner"},
		worker:  []string{"NATS_USER=worker", "NATS_PASSWORD=worker_password-secret", "NATS_INBOX_PREFIX=_INBOX_worker"},
		client:  teamA, redis: []string{"REDIS_URL=" + redistest.Start(t).URL()}})

	// team-a works with its own collection, through the API and the intake.
	sc.deliver(t, "orders", "nightly", "pw-orders")
	mustSchedctl(t, teamB, "collection", "create", "billing")
	mustSchedctl(t, teamB, "job", "create", "billing/invoice", "--every", "1h", "--http-post", "http://127.0.0.1:1/")
	asA := append([]string{"NATS_URL=" + srv.ClientURL()}, teamA...)
	for _, want := range []string{"nightly"} {
		if out := mustSchedctl(t, asA, "job", "list", "orders"); !strings.Contains(out, want) {
			t.Errorf("team-a's listing of orders lacks %s:\n%s", want, out)
		}
	}
	file := writeFile(t, t.TempDir(), "j.json", basicJob(t, sc.target.url("/orders/published"), "pw-pub"))
	since := time.Now()
	mustSchedctl(t, asA, "job", "publish", "orders/published", "-f", file)
	sc.target.waitDelivery(t, "/orders/published", since)
	// A published delete is answered through the tenant's own events, a missing job's too.
	if out := mustSchedctl(t, asA, "job", "publish", "orders/ghost", "--delete", "--wait", "1m"); out != "job orders/ghost: not found; nothing was deleted\n" {
		t.Errorf("team-a's publish --delete of a missing job printed %q", out)
	}

	// Refused on team-b's collection, on listing every collection, with a message that says so.
	for _, args := range [][]string{
		{"collection", "get", "billing"},
		{"collection", "delete", "billing", "--yes"},
		{"job", "get", "billing/invoice"},
		{"job", "list", "billing"},
		{"job", "delete", "billing/invoice", "--yes"},
		{"job", "create", "billing/mine", "--every", "1h", "--http-get", "http://127.0.0.1:1/"},
		{"job", "publish", "billing/mine", "-f", file},
		{"collection", "list"},
		{"job", "list"},
		{"cluster", "status"}, // the operators' view: planners, partitions, every stream's backlog
	} {
		out, errOut, code := schedctl(t, asA, args...)
		if code == 0 || !strings.Contains(errOut, "permission denied") || !strings.Contains(errOut, `user "team-a"`) ||
			strings.Contains(errOut, "is the planner running") {
			t.Errorf("team-a: schedctl %s: exit %d, want a permission error naming the user\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if out := mustSchedctl(t, teamB, "job", "get", "billing/invoice"); !strings.Contains(out, "invoice") {
		t.Errorf("team-b's job is gone after team-a's attempts:\n%s", out)
	}
	if _, _, code := schedctl(t, teamB, "job", "get", "billing/mine"); code == 0 {
		t.Error("team-a's publish into billing was applied")
	}

	// Without its inbox prefix, team-a is told what to do.
	_, errOut, code := schedctl(t, []string{"NATS_URL=" + srv.ClientURL(), "NATS_USER=team-a", "NATS_PASSWORD=team_a_password-secret"}, "job", "get", "orders/nightly")
	if code == 0 || !strings.Contains(errOut, "--inbox-prefix") {
		t.Errorf("team-a without its inbox prefix: exit %d\n%s", code, errOut)
	}

	// As a plain NATS client, team-a cannot read due messages, another's replies or JetStream.
	denied := make(chan error, 16)
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("team-a", "team_a_password-secret"), nats.CustomInboxPrefix("_INBOX_team_a"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var subs []*nats.Subscription
	for _, subject := range []string{"scheduler.due.>", "_INBOX.>", "_INBOX_team_b.>", "scheduler.results.>", "scheduler.api.>"} {
		sub, err := nc.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-denied:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") || !strings.Contains(err.Error(), subject) {
				t.Errorf("subscribe %s: %v", subject, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("subscribe %s: no permissions violation", subject)
		}
	}
	// Due messages, results and replies flow meanwhile (team-b lists its jobs): none reaches team-a.
	sc.target.waitDelivery(t, "/orders/nightly", time.Now())
	mustSchedctl(t, teamB, "job", "list", "billing")
	if err := nc.Flush(); err != nil { // whatever the server sent before this is read
		t.Fatal(err)
	}
	for _, sub := range subs {
		if n, _, _ := sub.Pending(); n > 0 {
			m, _ := sub.NextMsg(0)
			t.Errorf("team-a received %s on %s", m.Subject, sub.Subject)
		}
	}
	if _, err := nc.Request("$JS.API.STREAM.LIST", nil, 2*time.Second); err == nil {
		t.Error("team-a reached the JetStream API")
	}
}
