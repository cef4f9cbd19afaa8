package security

import (
	"context"
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

// Passwords rotated in place (a Kubernetes Secret refreshed in its mount): the planner's Redis
// password and the planner's and worker's NATS passwords are files, the servers come to accept
// only new ones, the files are rotated, and the old connections are closed. The services
// connect again with the new passwords and go on delivering, without a restart. Read once at
// start, every new connection was refused until the liveness check restarted them.
func TestPasswordsRotatedInPlace(t *testing.T) {
	users := map[string]string{"planner": "nats-pw-1", "worker": "nats-pw-1", "client": "pw-c"}
	srv := natstest.Start(t, withUsers(users))
	rdb := redistest.Start(t, redistest.WithACLUser("admin", "admin-pw"),
		redistest.WithArgs("--user", "resched", "on", ">redis-pw-1", "~*", "&*", "+@all"))
	secrets := t.TempDir()
	natsFile := writeFile(t, secrets, "nats-password", []byte("nats-pw-1\n"))
	redisFile := writeFile(t, secrets, "redis-password", []byte("redis-pw-1\n"))
	plain := strings.Replace(rdb.URL(), "admin:admin-pw@", "", 1)
	sc := run(t, setup{natsURL: srv.ClientURL(), planner: []string{"NATS_USER=planner", "NATS_PASSWORD_FILE=" + natsFile},
		worker: []string{"NATS_USER=worker", "NATS_PASSWORD_FILE=" + natsFile}, client: []string{"NATS_USER=client", "NATS_PASSWORD=pw-c"},
		redis: []string{"REDIS_URL=" + plain, "REDIS_USERNAME=resched", "REDIS_PASSWORD_FILE=" + redisFile}})
	sc.deliver(t, "c", "before", "pw-before")

	ctx := context.Background()
	admin := rdb.Client(t)
	testenv.WriteNewer(t, redisFile, []byte("redis-pw-2\n"))
	testenv.WriteNewer(t, natsFile, []byte("nats-pw-2\n"))
	if err := admin.Do(ctx, "ACL", "SETUSER", "resched", "resetpass", ">redis-pw-2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ClientKillByFilter(ctx, "USER", "resched").Err(); err != nil {
		t.Fatal(err)
	}
	srv.Reload(withUsers(map[string]string{"planner": "nats-pw-2", "worker": "nats-pw-2", "client": "pw-c"}))
	// The server turns out the connections made with the old password, then each service
	// connects again, at its next attempt, with the file's new one.
	for _, s := range []*service{sc.planner, sc.worker} {
		testenv.Eventually(t, 10*time.Second, s.Name+" turned out", func() bool { return s.logged("authorization violation") }, s.Tail)
		testenv.Eventually(t, 20*time.Second, s.Name+" connected again", func() bool { return s.status("/readyz") == 200 }, s.Tail)
	}
	sc.deliver(t, "c", "after", "pw-after")
	for _, s := range []*service{sc.planner, sc.worker} {
		if code := s.status("/healthz"); code != 200 || !s.Running() {
			t.Errorf("%s after the rotation: /healthz %d", s.Name, code)
		}
		if s.logged("pw-1") || s.logged("pw-2") {
			t.Errorf("%s logged a password", s.Name)
		}
	}
}
