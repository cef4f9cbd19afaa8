package main

import (
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
)

// TestNoPlanner runs against a NATS server on which no planner listens: the message names the
// subject asked, which shows where the server and prefix came from.
func TestNoPlanner(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	closed := "nats://127.0.0.1:1" // nothing listens on port 1

	for _, tc := range []struct {
		name      string
		env       map[string]string
		args      []string
		wantErr   string // stderr must contain it
		forbidden string // stderr must not contain it
	}{
		{"--server", nil, []string{"job", "get", "c/j", "--server", url},
			"schedctl: no planner answered on scheduler.api.jobs.get.c.j (NATS at " + url + ") — is the planner running and NATS_URL right?\n", ""},
		{"NATS_URL", map[string]string{"NATS_URL": url}, []string{"collection", "list"},
			"no planner answered on scheduler.api.collections.list (NATS at " + url + ")", ""},
		{"--server wins over NATS_URL", map[string]string{"NATS_URL": closed}, []string{"collection", "get", "c", "--server", url},
			"no planner answered on scheduler.api.collections.get.c", ""},
		{"--prefix", nil, []string{"job", "--prefix", "other", "run", "c", "j", "--server", url},
			"no planner answered on other.api.jobs.run.c.j", ""},
		{"RESCHED_SUBJECT_PREFIX", map[string]string{"RESCHED_SUBJECT_PREFIX": "env.sched"}, []string{"job", "history", "c/j", "--server", url},
			"no planner answered on env.sched.api.jobs.history.c.j", ""},
		{"no NATS server", nil, []string{"job", "get", "c/j", "--server", "nats://alice:hunter2@127.0.0.1:1"},
			"schedctl: connect to NATS at nats://REDACTED@127.0.0.1:1: ", "hunter2"},
		{"a URL that does not parse", nil, []string{"job", "get", "c/j", "--server", "nats://alice:hunt%zz@127.0.0.1:1"},
			"schedctl: connect to NATS: a server URL with credentials does not parse", "%zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, errOut := schedctl(t, "", tc.args...)
			if code != 1 || out != "" || !strings.Contains(errOut, tc.wantErr) ||
				(tc.forbidden != "" && strings.Contains(errOut, tc.forbidden)) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, tc.wantErr)
			}
		})
	}
}

// TestUsageErrors checks mistakes caught before any request: none of these needs a server.
func TestUsageErrors(t *testing.T) {
	t.Setenv("NATS_URL", "nats://127.0.0.1:1") // a request would fail with status 1, not 2
	for _, tc := range []struct {
		args    []string
		code    int
		wantOut string // stdout must contain it ("" for nothing)
		wantErr string // stderr must contain it ("" for nothing)
	}{
		{[]string{"job"}, 2, "", "usage: schedctl job <subcommand>"},
		{[]string{"job", "-o", "json"}, 2, "", "usage: schedctl job <subcommand>"},
		{[]string{"job", "help"}, 0, "  history COLLECTION/JOB", ""},
		{[]string{"collection", "--help"}, 0, "  create NAME", ""},
		{[]string{"job", "frob"}, 2, "", `schedctl job: unknown subcommand "frob"`},
		{[]string{"job", "get"}, 2, "", "schedctl job get: expected COLLECTION/JOB\nusage: schedctl job get COLLECTION/JOB\n"},
		{[]string{"job", "get", "c", "j", "extra"}, 2, "", "expected COLLECTION/JOB"},
		{[]string{"job", "get", "c"}, 2, "", `"c": name the job as COLLECTION/JOB`},
		{[]string{"job", "get", "c.x/j"}, 2, "", `collection name "c.x": must be 1 to 64`},
		{[]string{"job", "delete", "c", "j*"}, 2, "", `job name "j*"`},
		{[]string{"job", "put", "c/j"}, 2, "", "-f is required"},
		{[]string{"job", "put", "c/j", "-f", "/nonexistent/job.json"}, 2, "", "-f: open /nonexistent/job.json"},
		{[]string{"job", "get", "c/j", "-o", "toml"}, 2, "", `-o "toml": must be table, json or yaml`},
		{[]string{"job", "get", "c/j", "--timeout", "0s"}, 2, "", "--timeout"},
		{[]string{"job", "get", "c/j", "--prefix", "a b"}, 2, "", `subject prefix "a b"`},
		{[]string{"job", "get", "c/j", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"job", "get", "-h"}, 0, "", "usage: schedctl job get COLLECTION/JOB"},
		{[]string{"job", "list", "c", "--top", "-1"}, 2, "", "--top and --skip must be 0 or more"},
		{[]string{"collection", "list", "extra"}, 2, "", "expected [--filter EXPR]... [--top N]"},
		{[]string{"collection", "create", "b+d"}, 2, "", `collection name "b+d"`},
		{[]string{"collection", "create", "c", "--max-recurrence", "5x"}, 2, "", `--max-recurrence: "5x"`},
		{[]string{"collection", "create", "c", "--max-jobs", "-1"}, 2, "", "--max-jobs -1"},
		{[]string{"collection", "create", "c", "-f", "x.json", "--max-jobs", "3"}, 2, "", "exclude each other"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := schedctl(t, "", tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			check(t, "stdout", out, tc.wantOut)
			if !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.wantErr)
			}
		})
	}
}

func TestHoistGlobalFlags(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"-o", "json", "job", "get", "c/j"}, []string{"job", "-o", "json", "get", "c/j"}},
		{[]string{"--server=nats://x:4222", "--timeout", "1s", "collection", "list"},
			[]string{"collection", "--server=nats://x:4222", "--timeout", "1s", "list"}},
		{[]string{"job", "get", "c/j", "-o", "json"}, []string{"job", "get", "c/j", "-o", "json"}},
		{[]string{"-n", "5"}, []string{"-n", "5"}},       // not a global flag: left for run to refuse
		{[]string{"-o", "json"}, []string{"-o", "json"}}, // no command
		{nil, nil},
	} {
		if got := hoistGlobalFlags(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("hoistGlobalFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                        "nats://127.0.0.1:4222",
		"nats://u:pw@h:4222":                           "nats://REDACTED@h:4222",
		"nats://token@h:4222,nats://h2:4222":           "nats://REDACTED@h:4222,nats://h2:4222",
		"nats://u:p%zz@h":                              "(a URL with credentials)",
		"tls://user:secret@nats.example.com,tls://b:1": "tls://REDACTED@nats.example.com,tls://b:1",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// schedctl needs no JetStream domain: on a leaf node whose own JetStream is in another domain
// than the planners' streams, the API's requests and the intake's publish (its one JetStream
// call: a publish to a subject, answered by the stream that holds it) reach the hub's planners.
func TestThroughALeafNodeInAnotherDomain(t *testing.T) {
	hub := natstest.Start(t, natstest.WithLeafNodes(t, "hub"))
	p := startPlannerOn(t, hub)
	leaf := natstest.LeafOf(t, hub, "edge")
	at := []string{"--server", leaf.ClientURL()}
	if code, out, errOut := schedctl(t, "", append([]string{"collection", "create", "c"}, at...)...); code != 0 {
		t.Fatalf("collection create through the leaf: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut := schedctl(t, onceJob, append([]string{"job", "publish", "c/published", "-f", "-"}, at...)...)
	if code != 0 || !strings.HasPrefix(out, "job c/published: applied") {
		t.Fatalf("job publish through the leaf: exit %d, %q, %q", code, out, errOut)
	}
	p.mustRun(t, "", "job", "get", "c/published") // stored by the hub's planner
}

// job import's senders make their first request at once: they connect once, and share it
// (each made its own before, all but one left open, and the race detector saw the field
// written by one read by another).
func TestSendersAtOnceConnectOnce(t *testing.T) {
	ns := natstest.Start(t)
	before := ns.NumClients()
	inv := newInvocation("job import", "", strings.NewReader(""), io.Discard, io.Discard)
	if _, err := inv.parse([]string{"--server", ns.ClientURL()}, 0, 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := inv.connect(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := ns.NumClients() - before; n != 1 {
		t.Errorf("8 senders at once made %d connections, want 1", n)
	}
	inv.close()
}

// A collection's delete, enable and disable wait for the planner longer than other commands
// unless --timeout says otherwise: it goes through a large collection's jobs 1,000 at a time,
// and schedctl said nothing answered while it went on. Connecting still waits --timeout.
func TestCollectionWorkWaitsLonger(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, collectionWorkWait},
		{[]string{"--timeout", "3s"}, 3 * time.Second},
		{[]string{"--timeout", "10m"}, 10 * time.Minute},
	} {
		inv := newInvocation("collection disable", "NAME", strings.NewReader(""), io.Discard, io.Discard)
		if _, err := inv.parse(append([]string{"--server", url, "c"}, c.args...), 1, 1); err != nil {
			t.Fatal(err)
		}
		if err := inv.waitLonger(collectionWorkWait); err != nil {
			t.Fatal(err)
		}
		if err := inv.connect(); err != nil {
			t.Fatal(err)
		}
		if inv.client.timeout != c.want || (c.args == nil && inv.timeout != defaultTimeout) {
			t.Errorf("%v: waits %v for answers and %v to connect, want %v", c.args, inv.client.timeout, inv.timeout, c.want)
		}
		inv.close()
	}
}

// A collection's delete, enable or disable that is not answered within the wait says that the
// change may still be under way, and where to see it: a large collection's takes seconds, and
// one whose planner stopped is finished by another. Here a subscriber takes the request and
// never answers, as a planner killed in the middle of it.
func TestACollectionChangeNotAnsweredSaysWhereToLook(t *testing.T) {
	srv := natstest.Start(t)
	standIn(t, srv, "scheduler.api.collections.>", func(*nats.Msg) {})
	for _, args := range [][]string{{"collection", "enable", "big"}, {"collection", "delete", "big", "--yes"}} {
		code, _, errOut := schedctl(t, "", append(args, "--server", srv.ClientURL(), "--timeout", "300ms")...)
		if code != 1 || !strings.Contains(errOut, "no planner answered on scheduler.api.collections."+args[1]+".big within 300ms") ||
			!strings.Contains(errOut, "the "+args[1]+" may still be under way") || !strings.Contains(errOut, "schedctl cluster status") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	// Other requests say what they said.
	if _, _, errOut := schedctl(t, "", "collection", "get", "big", "--server", srv.ClientURL(), "--timeout", "300ms"); strings.Contains(errOut, "under way") {
		t.Errorf("collection get: %q", errOut)
	}
}
