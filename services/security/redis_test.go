package security

import (
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// A Redis ACL user (the default user off): the planner logs in with the user in the URL.
func TestRedisACLUser(t *testing.T) {
	rdb := redistest.Start(t, redistest.WithACLUser("resched", "acl-pw-77"))
	sc := run(t, setup{natsURL: natstest.Start(t).ClientURL(), redis: []string{"REDIS_URL=" + rdb.URL()}})
	sc.deliver(t, "c", "acl", "pw-acl")
	if sc.planner.logged("acl-pw-77") {
		t.Error("the planner logged the Redis password")
	}
	if !sc.planner.logged(`redis://resched:xxxxx@`) {
		t.Error("the planner does not log the Redis URL with its password masked")
	}

	// The user and password apart from the URL, the password from a file (a mounted Secret).
	file := writeFile(t, t.TempDir(), "redis-password", []byte("acl-pw-77\n"))
	plain := strings.Replace(rdb.URL(), "resched:acl-pw-77@", "", 1)
	second := start(t, sc.dir, "planner", "planner-2", "NATS_URL="+sc.setup.natsURL, "REDIS_URL="+plain,
		"REDIS_USERNAME=resched", "REDIS_PASSWORD_FILE="+file)
	second.waitReady(t)
	wrong := writeFile(t, t.TempDir(), "wrong", []byte("not-the-password"))
	third := start(t, sc.dir, "planner", "planner-3", "NATS_URL="+sc.setup.natsURL, "REDIS_URL="+plain,
		"REDIS_USERNAME=resched", "REDIS_PASSWORD_FILE="+wrong)
	testenv.Eventually(t, 30*time.Second, "the wrong password refused", func() bool { return third.logged("WRONGPASS") }, third.Tail)
	// Never accepted, the credentials fail liveness at once, as NATS's do: the orchestrator
	// restarts the planner, which reads its Secret again. A planner they were accepted from
	// stays live through a rotation's first two minutes (redisconn.AuthWatch).
	testenv.Eventually(t, 30*time.Second, "the planner with the wrong password not live", func() bool { return third.status("/healthz") == 503 }, third.Tail)
	if code := second.status("/healthz"); code != 200 {
		t.Errorf("the planner with the right password: /healthz %d, want 200", code)
	}
}

// Redis over TLS with a private CA, and a client certificate the server requires.
func TestRedisTLSWithClientCertificate(t *testing.T) {
	rdb := redistest.Start(t, redistest.WithTLS(tlstest.NewCA(t, "redis")))
	if !strings.HasPrefix(rdb.URL(), "rediss://") {
		t.Fatalf("URL %s", rdb.URL())
	}
	sc := run(t, setup{natsURL: natstest.Start(t).ClientURL(), redis: []string{"REDIS_URL=" + rdb.URL(),
		"REDIS_CA=" + rdb.CA, "REDIS_CERT=" + rdb.ClientCert.CertFile, "REDIS_KEY=" + rdb.ClientCert.KeyFile}})
	sc.deliver(t, "c", "tls", "pw-redis-tls")
}
