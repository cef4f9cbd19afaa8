package dashboard

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
)

// requests are the "dashboard request" records logged.
func requests(t *testing.T, logs *testenv.LogBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range logs.Records(t) {
		if r["msg"] == "dashboard request" {
			out = append(out, r)
		}
	}
	return out
}

// A change made in the page is logged with who made it, as the REST API logs its requests; so
// are refusals. Reads that succeed are not, at info: a page makes dozens.
func TestChangesAreLoggedWithTheirCaller(t *testing.T) {
	nc := natstest.Start(t).Connect(t) // no planner: a change is answered 503, and logged all the same
	auth := &switchAuth{grant: access.Grant{Subject: "alice", Role: access.Operator, Scopes: []string{"*"}}}
	logs := &testenv.LogBuffer{}
	d, err := New(Config{NATS: nc, Subjects: bus.NewSubjects("resched"), Auth: auth,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(d)
	defer srv.Close()
	do := func(method, path string) int {
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	do(http.MethodGet, "/dashboard/api/me")
	deleted := do(http.MethodDelete, "/dashboard/api/jobs/c1/j1")
	auth.set(false, access.Grant{Subject: "bob", Role: access.Reader, Scopes: []string{"*"}})
	do(http.MethodPost, "/dashboard/api/jobs/c1/j1/run")
	auth.set(true, access.Grant{})
	do(http.MethodGet, "/dashboard/api/overview")
	do(http.MethodGet, "/dashboard/api/live")

	got := requests(t, logs)
	want := []struct {
		method, path, caller string
		status               int
	}{
		{"DELETE", "/dashboard/api/jobs/c1/j1", "alice", deleted},
		{"POST", "/dashboard/api/jobs/c1/j1/run", "bob", http.StatusForbidden},
		{"GET", "/dashboard/api/overview", "", http.StatusUnauthorized},
		{"GET", "/dashboard/api/live", "", http.StatusUnauthorized},
	}
	if len(got) != len(want) {
		t.Fatalf("logged %d requests, want %d (the read that succeeded left out): %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g["method"] != w.method || g["path"] != w.path || g["caller"] != w.caller || g["status"] != float64(w.status) {
			t.Errorf("logged %v, want %s %s by %q answered %d", g, w.method, w.path, w.caller, w.status)
		}
	}
}
