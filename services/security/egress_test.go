package security

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

// A worker at its default settings calls no cloud metadata service (its answer, an instance's
// credentials, would be in the job's history for its owner to read), and a target's redirect
// elsewhere gets none of the job's credentials. Both through real processes and schedctl.
func TestAJobCannotReachTheMetadataServiceNorCarryItsKeysElsewhere(t *testing.T) {
	srv, sc := runOpen(t)
	nc := srv.Connect(t)
	sc.ctl(t, "collection", "create", "c")

	since := time.Now()
	sc.ctl(t, "job", "create", "c/metadata", "--http-get", "http://169.254.169.254/latest/meta-data/iam/security-credentials/", "--retry", "3@15s")
	var failed string
	testenv.Eventually(t, 30*time.Second, "the refused attempt in the history", func() bool {
		failed = failedAttempt(t, nc, "c", "metadata", since)
		return failed != ""
	})
	if !strings.Contains(failed, "address 169.254.169.254 is in 169.254.0.0/16") || !strings.Contains(failed, "RESCHED_WORKER_DENY_NETWORKS") {
		t.Errorf("the failure %s does not say why", failed)
	}
	// Refused for good: no retry waits (15 s), the job ends after its one attempt.
	var got struct {
		Properties struct {
			State  string         `json:"state"`
			Status map[string]any `json:"status"`
		} `json:"properties"`
	}
	testenv.Eventually(t, 10*time.Second, "the job ended", func() bool {
		if err := json.Unmarshal([]byte(sc.ctl(t, "job", "get", "c/metadata", "-o", "json")), &got); err != nil {
			t.Fatal(err)
		}
		return got.Properties.State != "Enabled"
	})
	if got.Properties.State != "Faulted" || got.Properties.Status["failureCount"] != 1.0 {
		t.Errorf("the job after the refusal: %+v, want Faulted after one failure", got.Properties)
	}

	// A redirect to another origin: the target that receives it gets no key.
	hop := redirectTo(t, sc.target.url("/c/landed"))
	since = time.Now()
	sc.ctl(t, "job", "create", "c/redirected", "--http-post", hop, "--header", "x-functions-key: FN-KEY-0451")
	if got := sc.target.waitDelivery(t, "/c/landed", since); got.functionKey != "" || got.authorization != "" {
		t.Errorf("the other origin received x-functions-key %q, Authorization %q", got.functionKey, got.authorization)
	}
}

// redirectTo serves a 307 to url at every path, and returns its own URL.
func redirectTo(t *testing.T, url string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.RedirectHandler(url, http.StatusTemporaryRedirect)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return "http://" + l.Addr().String() + "/hop"
}
