package sdktest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// TestPythonSDKDrivesTheGateway runs Python's unmodified azure-mgmt-scheduler (Debian's
// python3-azure; scripts/deps.sh python installs it) against the gateway: collections and jobs
// created, read, listed page by page and filtered, read and put back, read and patched back
// whole without the secrets it was answered without (as PowerShell updates a job), run,
// disabled, enabled and deleted (testdata/python_sdk.py). That client is generated from the
// swagger and reads every answer strictly: a retryInterval or timeToLive it cannot parse as an
// ISO 8601 duration, a date it cannot read, a long-running operation it cannot follow each
// fail it, and a field it does not find under the swagger's spelling ("Occurrence") is
// silently lost.
func TestPythonSDKDrivesTheGateway(t *testing.T) {
	python := pythonWithSDK(t)
	s := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := filepath.Join(testenv.RepoRoot(t), "services", "gateway", "sdktest", "testdata", "python_sdk.py")
	cmd := exec.CommandContext(ctx, python, script, s.base, "operator-token", s.target.url, tlstest.PFX(t, "pfx-password-py"), "pfx-password-py")
	// requests, unlike Go, sends loopback requests through a proxy set in the environment.
	cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+s.caFile, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Python client failed: %v\n%s", err, stderr.String())
	}
	var seen struct {
		Collection struct {
			ID          string
			State       string
			MaxJobCount int
		}
		Collections []string
		Created     struct {
			Name          string
			RetryInterval float64
		}
		Certificate struct {
			Type, Subject, Expires string
			PfxShown               bool
		}
		Got struct {
			RetryInterval, TimeToLive float64
			RetryCount                int
			SasKeyShown               bool
			Hours                     []int
			Next                      string
		}
		LastFriday struct {
			Occurrences, OccurrencesAfter [][]any
			NextBefore, NextAfter         string
		}
		History   []struct{ Status, Action string }
		Completed int
		Patched   struct {
			State         string
			RetryInterval float64
		}
		Disabled           []string
		Jobs               []string
		CollectionDisabled string
		DeletedJob         string
		CollectionsAfter   []string
	}
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("the script's output: %v\n%s", err, out)
	}
	t.Logf("the Python client read: %s", out)

	if want := "/subscriptions/sub-1/resourceGroups/rg-py/providers/Microsoft.Scheduler/jobCollections/py-orders"; seen.Collection.ID != want ||
		seen.Collection.State != "Enabled" || seen.Collection.MaxJobCount != 50 {
		t.Errorf("the collection: %+v", seen.Collection)
	}
	if !reflect.DeepEqual(seen.Collections, []string{"py-orders"}) {
		t.Errorf("the resource group lists %v", seen.Collections)
	}
	// The durations the client sent (PT30S, PT10M) come back in a form it reads.
	if seen.Created.Name != "py-orders/nightly" || seen.Created.RetryInterval != 30 || seen.Got.RetryInterval != 30 ||
		seen.Got.TimeToLive != 600 || seen.Got.RetryCount != 2 || seen.Patched.RetryInterval != 30 {
		t.Errorf("the job's durations: created %+v, read %+v, patched %+v", seen.Created, seen.Got, seen.Patched)
	}
	if seen.Got.SasKeyShown || seen.Certificate.PfxShown {
		t.Errorf("an answer held a secret: SAS key %v, PFX or password %v", seen.Got.SasKeyShown, seen.Certificate.PfxShown)
	}
	if seen.Certificate.Type != "ClientCertificate" || seen.Certificate.Subject == "" || seen.Certificate.Expires == "" {
		t.Errorf("the certificate's details: %+v", seen.Certificate)
	}
	if !reflect.DeepEqual(seen.Got.Hours, []int{3}) || !strings.HasSuffix(seen.Got.Next, "03:30:00+00:00") {
		t.Errorf("the schedule: hours %v, next %s", seen.Got.Hours, seen.Got.Next)
	}
	// A monthly occurrence's count is read, and a job read and put back keeps it.
	lastFriday := [][]any{{"Friday", -1.0}}
	if lf := seen.LastFriday; !reflect.DeepEqual(lf.Occurrences, lastFriday) || !reflect.DeepEqual(lf.OccurrencesAfter, lastFriday) ||
		lf.NextBefore != lf.NextAfter || !strings.HasSuffix(lf.NextBefore, "09:00:00+00:00") {
		t.Errorf("the last Friday of each month: %+v", lf)
	}
	if len(seen.History) != 1 || seen.History[0].Status != "Completed" || seen.History[0].Action != "MainAction" || seen.Completed != 1 {
		t.Errorf("the history after a run: %+v (%d completed)", seen.History, seen.Completed)
	}
	if n := s.target.count("/py"); n != 1 {
		t.Errorf("the target was called %d times, want once (the run)", n)
	}
	if seen.Patched.State != "Disabled" || !reflect.DeepEqual(seen.Disabled, []string{"py-orders/nightly"}) {
		t.Errorf("disabled: %+v, listed %v", seen.Patched, seen.Disabled)
	}
	if !reflect.DeepEqual(seen.Jobs, []string{"py-orders/certificate", "py-orders/nightly"}) {
		t.Errorf("the jobs, one a page: %v", seen.Jobs)
	}
	if seen.CollectionDisabled != "Disabled" || seen.DeletedJob != "not found" || len(seen.CollectionsAfter) != 0 {
		t.Errorf("disable %s, deleted job %s, collections left %v", seen.CollectionDisabled, seen.DeletedJob, seen.CollectionsAfter)
	}
}

// pythonWithSDK is a python3 that imports azure.mgmt.scheduler: Debian's, where python3-azure
// puts it, before any other on PATH (pyenv's does not see Debian's packages).
func pythonWithSDK(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		if exec.Command(p, "-c", "import azure.mgmt.scheduler").Run() == nil {
			return p
		}
	}
	t.Fatal("no python3 imports azure.mgmt.scheduler: run scripts/deps.sh python (Debian: apt-get install python3-azure)")
	return ""
}
