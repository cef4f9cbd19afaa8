package redistest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/tlstest"
)

// A server with an ACL user and TLS lets in only a client with the password and a client
// certificate of the CA: the options do configure the server, not only the test's client.
func TestACLAndTLSAreEnforced(t *testing.T) {
	s := redistest.Start(t, redistest.WithACLUser("app", "app-pw"), redistest.WithTLS(tlstest.NewCA(t, "test")))
	ctx := context.Background()
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("the test's client: %v", err)
	}
	if !strings.HasPrefix(s.URL(), "rediss://app:app-pw@127.0.0.1:") {
		t.Errorf("URL %s", s.URL())
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "app", Password: "app-pw", MaxRetries: -1})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Error("a client without TLS got in")
	}
	c := s.Client(t).Options()
	wrong := *c
	wrong.Password, wrong.MaxRetries = "nope", -1
	w := redis.NewClient(&wrong)
	defer w.Close()
	if err := w.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("a wrong password: %v", err)
	}
}
