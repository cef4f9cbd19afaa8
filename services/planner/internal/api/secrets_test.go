package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

const (
	keyOld = "old=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	keyNew = "new=ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
)

func ring(t *testing.T, text string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.ParseKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// withHeader is hourly with a bearer token too, the other kind of secret an HTTP action has.
const withHeader = `{"startTime": "2024-01-02T00:00:00Z",
  "action": {"type": "Https", "request": {"uri": "https://example.com/hook", "method": "POST",
    "headers": {"Authorization": "Bearer tok-4711", "X-Plain": "visible"},
    "authentication": {"type": "Basic", "username": "u", "password": "s3cret-pass"}}},
  "recurrence": {"frequency": "Hour", "interval": 1}}`

// storedAction is the job's action as Redis holds it.
func (e *env) storedAction(t *testing.T, c, j string) (*job.Action, string) {
	t.Helper()
	rec, err := e.store.GetJob(context.Background(), c, j)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jobs.DecodeBlob(rec.Definition)
	if err != nil {
		t.Fatal(err)
	}
	return p.Action, string(rec.Definition)
}

func TestSecretsAreSealedInRedisAndNeverAnswered(t *testing.T) {
	k := ring(t, keyOld)
	e := newEnv(t, withKeys(k))
	e.ok(t, "collections.put.c", `{}`, nil)
	put := e.ok(t, "jobs.put.c.j", withHeader, nil)
	got := e.ok(t, "jobs.get.c.j", ``, nil)
	act, raw := e.storedAction(t, "c", "j")
	for _, s := range []string{"s3cret-pass", "tok-4711"} {
		for where, text := range map[string]string{"Redis": raw, "the put reply": string(put.Data), "the get reply": string(got.Data)} {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %s: %s", where, s, text)
			}
		}
	}
	if !strings.Contains(raw, "visible") || !strings.Contains(string(got.Data), `"Authorization":""`) {
		t.Errorf("a header that is not secret was sealed, or the Authorization header vanished from the reply: %s", got.Data)
	}
	if secrets.KeyOf(act.Request.Authentication.Password) != "old" || secrets.KeyOf(act.Request.Headers["Authorization"]) != "old" {
		t.Fatalf("stored secrets are not sealed with the key: %s", raw)
	}
	if err := k.OpenAction(act, "c", "j"); err != nil || act.Request.Authentication.Password != "s3cret-pass" || act.Request.Headers["Authorization"] != "Bearer tok-4711" {
		t.Fatalf("the stored secrets do not open to what was put: %v", err)
	}

	// A patch of something else keeps the secrets, sealed again.
	e.ok(t, "jobs.patch.c.j", `{"action": {"request": {"headers": {"X-Plain": "changed"}}}}`, nil)
	act, raw = e.storedAction(t, "c", "j")
	if strings.Contains(raw, "s3cret-pass") || k.OpenAction(act, "c", "j") != nil || act.Request.Authentication.Password != "s3cret-pass" ||
		act.Request.Headers["Authorization"] != "Bearer tok-4711" || act.Request.Headers["X-Plain"] != "changed" {
		t.Fatalf("after a patch: %s", raw)
	}

	// A client cannot pass a value off as sealed.
	bad := strings.Replace(hourly, "s3cret-pass", secrets.Prefix+"old:AAAA", 1)
	a := e.fail(t, "jobs.put.c.j2", bad, "400", jobs.CodeBadRequest)
	if !strings.Contains(a.Error.Message, "action.request.authentication.password") || !strings.Contains(a.Error.Message, "reserved") {
		t.Errorf("reserved prefix: %+v", a.Error)
	}
}

func TestResealMovesEveryJobToTheNewestKey(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "collections.put.c", `{}`, nil)
	e.ok(t, "jobs.put.c.clear", hourly, nil) // stored before any key was configured
	e.ok(t, "jobs.put.c.nosecret", `{"action": {"type": "Http", "request": {"uri": "http://x/", "method": "GET"}}, "recurrence": {"frequency": "Hour"}}`, nil)
	if _, raw := e.storedAction(t, "c", "clear"); !strings.Contains(raw, "s3cret-pass") {
		t.Fatal("test setup: without keys the secret is stored clear")
	}

	old := jobs.New(jobs.Config{Store: e.store, Validator: validator(t), Keys: ring(t, keyOld)})
	if _, _, err := old.PutJob(context.Background(), "c", "sealed", []byte(withHeader), false); err != nil {
		t.Fatal(err)
	}
	before, _ := e.store.GetJob(context.Background(), "c", "sealed")

	both := ring(t, keyNew+","+keyOld)
	rotated := jobs.New(jobs.Config{Store: e.store, Validator: validator(t), Keys: both})
	n, err := rotated.Reseal(context.Background())
	if err != nil || n.Jobs != 3 || n.Resealed != 2 {
		t.Fatalf("reseal: %+v, %v; want 3 jobs looked at, 2 resealed", n, err)
	}
	newOnly := ring(t, keyNew)
	for _, j := range []string{"clear", "sealed"} {
		act, raw := e.storedAction(t, "c", j)
		if strings.Contains(raw, "s3cret-pass") || secrets.KeyOf(act.Request.Authentication.Password) != "new" {
			t.Errorf("%s after reseal: %s", j, raw)
		}
		if err := newOnly.OpenAction(act, "c", j); err != nil || act.Request.Authentication.Password != "s3cret-pass" {
			t.Errorf("%s does not open with the new key alone: %v", j, err)
		}
	}
	after, _ := e.store.GetJob(context.Background(), "c", "sealed")
	if !after.Next.Equal(before.Next) || !after.Accepted.Equal(before.Accepted) || after.State != before.State || after.Version == before.Version {
		t.Errorf("reseal changed the schedule or kept the version: before %+v after %+v", before, after)
	}
	if n, err := rotated.Reseal(context.Background()); err != nil || n.Resealed != 0 {
		t.Errorf("a second reseal: %+v, %v; want nothing to do", n, err)
	}
}

func validator(t *testing.T) *jobschema.Validator {
	t.Helper()
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
