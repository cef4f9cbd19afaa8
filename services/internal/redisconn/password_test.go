package redisconn_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redisconn"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// A password read from a file is read again for each new connection: here Redis comes to
// accept only a new password, the file is rotated in place (a Kubernetes Secret refreshed in
// its mount), and the client's connections are closed. Read once at start, every connection
// after was refused (WRONGPASS) until a restart.
func TestARotatedPasswordFileIsUsedOnTheNextConnection(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Start(t, redistest.WithACLUser("admin", "admin-password"),
		redistest.WithArgs("--user", "planner", "on", ">first-password", "~*", "&*", "+@all"))
	admin := rs.Client(t)
	file := filepath.Join(t.TempDir(), "redis-password")
	testenv.WriteNewer(t, file, []byte("first-password\n"))
	rdb, err := redisconn.Options{URL: "redis://" + rs.Addr + "/0", User: "planner", Password: "first-password", PasswordFile: file}.Client("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("with the first password: %v", err)
	}

	if err := admin.Do(ctx, "ACL", "SETUSER", "planner", "resetpass", ">second-password").Err(); err != nil {
		t.Fatal(err)
	}
	testenv.WriteNewer(t, file, []byte("second-password\n"))
	if err := admin.ClientKillByFilter(ctx, "USER", "planner").Err(); err != nil {
		t.Fatal(err)
	}
	// A connection killed may fail one call (its retry is go-redis's); the new ones must work.
	testenv.Eventually(t, 5*time.Second, "a connection with the rotated password", func() bool {
		err = rdb.Ping(ctx).Err()
		return err == nil
	}, func() string { return fmt.Sprint(err) })
}

// Every topology's client takes the password file's provider and, over TLS, the dialer that
// reads the CA file again: a cluster's nodes and a Sentinel's data nodes connect as a single
// server's do.
func TestEveryTopologyReadsItsFilesAgain(t *testing.T) {
	file := filepath.Join(t.TempDir(), "redis-password")
	testenv.WriteNewer(t, file, []byte("secret\n"))
	ca := tlstest.NewCA(t, "topologies")
	for _, url := range []string{"rediss://127.0.0.1:1/0", "rediss+cluster://127.0.0.1:1,127.0.0.1:2/", "rediss+sentinel://127.0.0.1:1/mymaster/0"} {
		rdb, err := redisconn.Options{URL: url, Password: "secret", PasswordFile: file, CA: ca.CertFile}.Client("test", nil)
		if err != nil {
			t.Fatal(url, err)
		}
		var provider func(context.Context) (string, string, error)
		var dialer func(context.Context, string, string) (net.Conn, error)
		switch c := rdb.(type) {
		case *redis.Client:
			provider, dialer = c.Options().CredentialsProviderContext, c.Options().Dialer
		case *redis.ClusterClient:
			provider, dialer = c.Options().CredentialsProviderContext, c.Options().Dialer
		default:
			t.Fatalf("%s: a %T", url, rdb)
		}
		if provider == nil {
			t.Errorf("%s: no credentials provider", url)
		} else if _, password, _ := provider(context.Background()); password != "secret" {
			t.Errorf("%s: the provider says %q", url, password)
		}
		// Only the cluster's options show whether the dialer is ours: go-redis fills in its own
		// for one server (ours is checked against a real server above) and wraps ours in its
		// failover dialer for Sentinel.
		if dialer == nil && strings.Contains(url, "cluster") {
			t.Errorf("%s: go-redis's own dialer, which verifies with the CAs read at start", url)
		}
		_ = rdb.Close()
	}
}

// A password or CA file gone between the start's reading and the client is an error that
// names it, not a client without them.
func TestAMissingFileFailsTheClient(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	for what, o := range map[string]redisconn.Options{
		"Redis password": {URL: "redis://127.0.0.1:1/0", Password: "pw", PasswordFile: missing},
		"Redis CA":       {URL: "rediss://127.0.0.1:1/0", CA: missing},
	} {
		if rdb, err := o.Client("test", nil); err == nil || !strings.Contains(err.Error(), what) {
			if rdb != nil {
				_ = rdb.Close()
			}
			t.Errorf("%s file missing: %v, want an error naming it", what, err)
		}
	}
}
