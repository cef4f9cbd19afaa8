package executor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/shared/job"
)

// sealedDue is a due occurrence whose Basic password the planner sealed with k for job c/j.
func sealedDue(t *testing.T, k *secrets.Keyring, retries int) bus.Due {
	t.Helper()
	act := job.Action{ActionSpec: job.ActionSpec{Type: job.ActionHTTP, RetryPolicy: policy(job.RetryFixed, retries, 30e9),
		Request: &job.HTTPRequest{URI: "http://t/", Method: "GET",
			Authentication: &job.HTTPAuthentication{Type: job.AuthBasic, Username: "u", Password: "PASSWORD-7"}}}}
	if err := k.SealAction(&act, "c", "j"); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(act)
	if strings.Contains(string(raw), "PASSWORD-7") {
		t.Fatal("test setup: the password is not sealed")
	}
	return bus.Due{Collection: "c", Job: "j", Scheduled: scheduled, ExecutionTag: "t", Occurrence: 1, Action: raw}
}

func keyring(t *testing.T, text string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.ParseKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const (
	key1 = "k1=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	key2 = "k2=ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
)

func TestAWorkerWithTheKeyDeliversTheClearSecret(t *testing.T) {
	k := keyring(t, key1)
	d := &fakeDeliverer{}
	e := executor.New(executor.Config{Deliverer: d, Secrets: k})
	dec, err := e.Execute(context.Background(), executor.Attempt{Due: sealedDue(t, k, 0), Phase: executor.PhaseMain, Delivery: 1})
	if err != nil || dec.Verdict != executor.Ack {
		t.Fatalf("decision %+v, %v", dec, err)
	}
	if got := d.specs[0].Request.Authentication.Password; got != "PASSWORD-7" {
		t.Errorf("the deliverer got password %q", got)
	}
}

func TestAWorkerWithoutTheKeyFailsTheAttemptClearly(t *testing.T) {
	sealed := sealedDue(t, keyring(t, key1), 2)
	for name, k := range map[string]*secrets.Keyring{"no keys": nil, "another key": keyring(t, key2)} {
		t.Run(name, func(t *testing.T) {
			d := &fakeDeliverer{}
			e := executor.New(executor.Config{Deliverer: d, Secrets: k})
			dec, err := e.Execute(context.Background(), executor.Attempt{Due: sealed, Phase: executor.PhaseMain, Delivery: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(d.specs) != 0 {
				t.Fatal("the action was delivered without its secret")
			}
			msg := dec.Result.Message
			if dec.Result.Status != job.ExecutionFailed || dec.Verdict != executor.Retry {
				t.Errorf("status %s verdict %s; want a failed attempt, retried (another worker may hold the key)", dec.Result.Status, dec.Verdict)
			}
			for _, want := range []string{"cannot be decrypted", `"k1"`, "action.request.authentication.password", "RESCHED_SECRET_KEYS_FILE"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			if strings.Contains(msg, "PASSWORD-7") || strings.Contains(msg, secrets.Prefix) {
				t.Errorf("message shows the secret: %q", msg)
			}
		})
	}
}
