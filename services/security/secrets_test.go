package security

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

func newKey(t *testing.T, id string) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return id + "=" + base64.StdEncoding.EncodeToString(b)
}

// secretJobs are the jobs of the test, each with secrets of its own; a job's secrets are
// recognisable values so that any copy of them, anywhere, is found.
func secretJobs(t *testing.T, tg *target) map[string][]byte {
	t.Helper()
	withSAS := func(action map[string]any) map[string]any {
		action["errorAction"] = map[string]any{"type": "StorageQueue", "queueMessage": map[string]any{
			"storageAccount": "acct", "queueName": "errors", "message": "failed", "sasToken": "sv=2024&sig=SAS-SECRET-31337"}}
		return action
	}
	jobs := map[string]map[string]any{
		"basic": withSAS(map[string]any{"type": "Http", "request": map[string]any{"method": "POST", "uri": tg.url("/c/basic"),
			"authentication": map[string]any{"type": "Basic", "username": "svc", "password": "BASIC-SECRET-4711"}}}),
		"bearer": {"type": "Http", "request": map[string]any{"method": "POST", "uri": tg.url("/c/bearer?code=FUNCTION-CODE-9090"),
			"headers": map[string]string{"Authorization": "Bearer HEADER-SECRET-0815", "x-functions-key": "FUNCTION-KEY-4242"}}},
		"intake": {"type": "Http", "request": map[string]any{"method": "POST", "uri": tg.url("/c/intake"),
			"authentication": map[string]any{"type": "Basic", "username": "svc", "password": "INTAKE-SECRET-2323"}}},
	}
	out := map[string][]byte{}
	for name, action := range jobs {
		b, err := json.Marshal(map[string]any{"properties": map[string]any{"action": action,
			"recurrence": map[string]any{"frequency": "Second", "interval": 1}}})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

var secretValues = []string{"BASIC-SECRET-4711", "SAS-SECRET-31337", "HEADER-SECRET-0815", "INTAKE-SECRET-2323", "FUNCTION-KEY-4242", "FUNCTION-CODE-9090"}

// wantAuthorization is what the target must receive from each job.
var wantAuthorization = map[string]string{
	"basic":  "Basic " + base64.StdEncoding.EncodeToString([]byte("svc:BASIC-SECRET-4711")),
	"bearer": "Bearer HEADER-SECRET-0815",
	"intake": "Basic " + base64.StdEncoding.EncodeToString([]byte("svc:INTAKE-SECRET-2323")),
}

// recorder keeps every message of a subscription.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) add(m *nats.Msg) {
	r.mu.Lock()
	r.msgs = append(r.msgs, string(m.Data))
	r.mu.Unlock()
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// redisValues is every value Redis holds, as text.
func redisValues(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		kind, _ := rdb.Type(ctx, key).Result()
		var v any
		switch kind {
		case "string":
			v, _ = rdb.Get(ctx, key).Result()
		case "hash":
			v, _ = rdb.HGetAll(ctx, key).Result()
		case "zset":
			v, _ = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		case "set":
			v, _ = rdb.SMembers(ctx, key).Result()
		case "list":
			v, _ = rdb.LRange(ctx, key, 0, -1).Result()
		}
		b, _ := json.Marshal(v)
		sb.WriteString(key + " " + string(b) + "\n")
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// holding lists the secret values a text holds.
func holding(text string) []string {
	var found []string
	for _, s := range secretValues {
		if strings.Contains(text, s) {
			found = append(found, s)
		}
	}
	return found
}

// With keys configured, no secret rests in clear: not in Redis (its values and its files), not
// in the JetStream files, not in the due messages a subscriber sees, not in the logs; the
// target still gets every credential. A worker without the key fails clearly; a rotation with
// re-encryption keeps every job deliverable.
func TestSecretsAreSealedEndToEnd(t *testing.T) {
	dir := t.TempDir()
	k1 := newKey(t, "k1")
	keys := writeFile(t, dir, "secret-keys", []byte("# the keys of the test\n"+k1+"\n"))
	srv := natstest.Start(t)
	rdb := redistest.Start(t, redistest.WithPersistence())
	keyEnv := []string{"RESCHED_SECRET_KEYS_FILE=" + keys}
	sc := run(t, setup{natsURL: srv.ClientURL(), redis: []string{"REDIS_URL=" + rdb.URL()}, keys: keyEnv})
	if !sc.planner.logged(`job secrets are sealed with key \"k1\"`) || !sc.planner.logged(`"secret_keys":["k1"]`) {
		t.Error("the planner does not say how secrets rest")
	}

	due := &recorder{}
	nc := srv.Connect(t)
	if _, err := nc.Subscribe("scheduler.due.>", due.add); err != nil {
		t.Fatal(err)
	}
	sc.ctl(t, "collection", "create", "c")
	since := time.Now()
	for name, def := range secretJobs(t, sc.target) {
		verb := "put"
		if name == "intake" {
			verb = "publish"
		}
		sc.ctl(t, "job", verb, "c/"+name, "-f", writeFile(t, dir, name+".json", def))
	}
	checkDelivered(t, sc, since)
	answer := sc.ctl(t, "job", "get", "c/bearer", "-o", "json")
	if found := holding(answer); len(found) > 0 || !strings.Contains(answer, "/c/bearer?code=") {
		t.Errorf("the API answers %v, or not the URI without its code: %s", found, answer)
	}

	// Nothing in clear where it rests or travels.
	testenv.Eventually(t, 10*time.Second, "due messages seen", func() bool { return len(due.all()) >= 6 })
	for _, m := range due.all() {
		if found := holding(m); len(found) > 0 {
			t.Fatalf("a due message holds %v: %s", found, m)
		}
	}
	if !strings.Contains(strings.Join(due.all(), "\n"), `"password":"rsenc1:k1:`) {
		t.Error("the due messages do not carry the sealed password: the check looked at the wrong thing")
	}
	values := redisValues(t, rdb.Client(t))
	if found := holding(values); len(found) > 0 {
		t.Errorf("Redis holds %v", found)
	}
	if !strings.Contains(values, "rsenc1:k1:") {
		t.Error("Redis holds no sealed value: the check looked at the wrong thing")
	}
	if err := rdb.Client(t).Save(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if found := testenv.FilesHolding(t, rdb.Dir(), secretValues...); len(found) > 0 {
		t.Errorf("Redis files hold secrets: %v", found)
	}
	if found := testenv.FilesHolding(t, srv.StoreDir(), secretValues...); len(found) > 0 {
		t.Errorf("the JetStream files hold secrets: %v", found)
	}
	if found := testenv.FilesHolding(t, rdb.Dir(), "rsenc1:k1:"); len(found) == 0 {
		t.Error("the Redis files hold no sealed value: the check looked at the wrong place")
	}

	// A worker without the key: the attempt fails, saying why, and nothing is delivered.
	sc.worker.Stop(t, 10*time.Second)
	noKey := sc.startWorker(t, "worker-without-key")
	noKey.waitReady(t)
	without := time.Now()
	var failed string
	testenv.Eventually(t, 30*time.Second, "a failed attempt in the history", func() bool {
		failed = failedAttempt(t, nc, "c", "basic", without)
		return failed != ""
	})
	for _, want := range []string{"cannot be decrypted", `key \"k1\"`, "RESCHED_SECRET_KEYS_FILE"} {
		if !strings.Contains(failed, want) {
			t.Errorf("the failure %s does not say %s", failed, want)
		}
	}
	if found := holding(failed); len(found) > 0 || sc.target.receivedSince("/c/basic", without) > 0 {
		t.Errorf("without the key: %v in the history, or a delivery", found)
	}
	noKey.Stop(t, 10*time.Second)

	// Rotation: k2 first everywhere, re-encryption, then k1 removed.
	k2 := newKey(t, "k2")
	writeFile(t, dir, "secret-keys", []byte(k2+"\n"+k1+"\n"))
	sc.planner.Stop(t, 10*time.Second)
	sc.planner.Restart(t)
	sc.worker.Restart(t)
	sc.planner.waitReady(t)
	reencrypt := exec.Command(filepath.Join(bin, "planner"), "-reencrypt")
	reencrypt.Env = append(reencrypt.Environ(), "REDIS_URL="+rdb.URL(), "RESCHED_SECRET_KEYS_FILE="+keys, "RESCHED_PLANNER_HTTP_ADDR=127.0.0.1:0")
	out, err := reencrypt.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"msg":"re-encrypted job secrets","key":"k2","jobs":3,"resealed":3`) {
		t.Fatalf("planner -reencrypt: %v\n%s", err, out)
	}
	if strings.Contains(redisValues(t, rdb.Client(t)), "rsenc1:k1:") {
		t.Fatal("a value sealed with k1 is left after re-encryption")
	}
	writeFile(t, dir, "secret-keys", []byte(k2+"\n"))
	sc.planner.Stop(t, 10*time.Second)
	sc.worker.Stop(t, 10*time.Second)
	sc.planner.Restart(t)
	sc.worker.Restart(t)
	checkDelivered(t, sc, time.Now())

	for _, s := range []*service{sc.planner, sc.worker, noKey} {
		if found := holding(testenv.TailOf(s.Log, 8<<20)); len(found) > 0 {
			t.Errorf("%s logged %v", s.Name, found)
		}
	}
}

// checkDelivered waits for every job to reach the target after since with its credentials.
func checkDelivered(t *testing.T, sc *scheduler, since time.Time) {
	t.Helper()
	for name, want := range wantAuthorization {
		got := sc.target.waitDelivery(t, "/c/"+name, since)
		if got.authorization != want {
			t.Errorf("%s: the target got Authorization %q, want %q", name, got.authorization, want)
		}
		if name == "bearer" && (got.functionKey != "FUNCTION-KEY-4242" || got.code != "FUNCTION-CODE-9090") {
			t.Errorf("%s: the target got x-functions-key %q and code %q, want the job's", name, got.functionKey, got.code)
		}
	}
}

// failedAttempt returns the message of a failed attempt of c/j that started after since, or "".
func failedAttempt(t *testing.T, nc *nats.Conn, c, j string, since time.Time) string {
	t.Helper()
	msg, err := nc.Request("scheduler.api.jobs.history."+c+"."+j, []byte(`{"status": "Failed"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Value []struct {
			StartTime time.Time `json:"startTime"`
			Message   string    `json:"message"`
		} `json:"value"`
	}
	if err := json.Unmarshal(msg.Data, &page); err != nil {
		t.Fatalf("history: %v: %s", err, msg.Data)
	}
	for _, e := range page.Value {
		if e.StartTime.After(since) {
			b, _ := json.Marshal(e.Message)
			return string(b)
		}
	}
	return ""
}
