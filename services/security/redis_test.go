package security

import (
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
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
