package sdktest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/testenv"
)

// The dashboard in a real Chromium (Debian's, driven by playwright-core; scripts/deps.sh browser
// installs both): sign-in, overview, jobs with search and filters, a job with its runs, calendar
// and live history, run/disable/enable/delete, the recurrence builder with its preview and field
// errors, a lost live connection, the reader role, phone width, keyboard and dark mode, and no
// request outside the gateway. The browser reaches the gateway through a proxy that serves it
// under a path of its own (/resched/), as an ingress shared with other tools does: a URL the
// page wrote from the root would miss the gateway, and count as a request outside it.
func TestDashboardInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not on PATH: run scripts/deps.sh browser (Debian: apt-get install chromium)")
	}
	root := testenv.RepoRoot(t)
	modules := filepath.Join(root, "scripts", "browser", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "playwright-core")); err != nil {
		t.Fatal("playwright-core is not installed: run scripts/deps.sh browser")
	}
	s := startStack(t)
	coll := s.base + "/subscriptions/sub-1/resourceGroups/rg-a/providers/Microsoft.Scheduler/jobCollections/orders"
	put := func(path, body string) {
		req, _ := http.NewRequest("PUT", coll+path+"?api-version=2016-03-01", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer operator-token")
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("PUT %s: %d %s", path, resp.StatusCode, b)
		}
	}
	put("", `{"location": "West Europe", "properties": {"sku": {"name": "Standard"}}}`)
	tomorrow := time.Now().Add(24 * time.Hour).UTC().Format("2006-01-02T15:00:00Z")
	job := func(path string, auth string) string {
		return fmt.Sprintf(`{"properties": {"startTime": %q, "action": {"type": "Http%s", "request": {"uri": %q, "method": "POST"%s},
		  "retryPolicy": {"retryType": "None"}}, "recurrence": {"frequency": "Hour", "interval": 1}}}`,
			tomorrow, map[bool]string{true: "s", false: ""}[auth != ""], s.target.url+path, auth)
	}
	put("/jobs/http-ok", job("/ok", ""))
	// http-fail's error action succeeds: the jobs list must still read its run as failed.
	put("/jobs/http-fail", strings.Replace(job("/fail", ""), `"retryPolicy"`,
		fmt.Sprintf(`"errorAction": {"type": "Http", "request": {"uri": %q, "method": "POST"}}, "retryPolicy"`, s.target.url+"/ok"), 1))
	put("/jobs/report", job("/report?code=report-function-code", `, "headers": {"x-functions-key": "report-function-key"},
		"authentication": {"type": "Basic", "username": "u", "password": "report-secret"}`))

	nc, err := nats.Connect(s.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "dashboard.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "BASE="+underPath(t, s, "/resched"), "OPERATOR=admin-token", "READER=reader-token",
		"COLLECTION="+plannerName(t, nc, "orders"), "CHROMIUM="+chromium, "TARGET="+s.target.url, "SCREENSHOTS="+screenshots(t))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the browser checks failed: %v", err)
	}
}

// underPath is the URL of a proxy that serves the stack's gateway under path, taking path off
// before it passes a request on.
func underPath(t *testing.T, s *stack, path string) string {
	gateway, err := url.Parse(s.base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(gateway)
	proxy.Transport = s.client.Transport.(*recordingTransport).next
	srv := httptest.NewServer(http.StripPrefix(path, proxy))
	t.Cleanup(srv.Close)
	return srv.URL + path
}

// screenshots is where the test writes a screenshot of each page: RESCHED_SCREENSHOTS (the
// README's and docs/dashboard.md's come from RESCHED_SCREENSHOTS=docs/images), else a directory
// of the test.
func screenshots(t *testing.T) string {
	if dir := os.Getenv("RESCHED_SCREENSHOTS"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			t.Fatal(err)
		}
		return abs
	}
	return t.TempDir()
}
