package redisconn_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redisconn"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// A client certificate renewed on disk is presented from the next connection on: here the
// server comes to trust only a new CA, the certificate files are renewed with one it signed,
// and the client's connections are closed. Read once at start, the client kept presenting the
// old certificate, and every connection after was refused until a restart.
func TestARenewedClientCertificateIsPresentedOnTheNextConnection(t *testing.T) {
	ctx := context.Background()
	first := tlstest.NewCA(t, "first")
	rs := redistest.Start(t, redistest.WithTLS(first))
	admin := rs.Client(t) // its connection, made now, outlives the change of CA
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	tlstest.Renew(t, rs.ClientCert.CertFile, cert)
	tlstest.Renew(t, rs.ClientCert.KeyFile, key)
	rdb, err := redisconn.Options{URL: rs.URL(), CA: rs.CA, Cert: cert, Key: key}.Client("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("with the first certificate: %v", err)
	}

	second := tlstest.NewCA(t, "second")
	renewed := second.Client(t, "redis-client")
	if err := admin.ConfigSet(ctx, "tls-ca-cert-file", second.CertFile).Err(); err != nil {
		t.Fatal(err)
	}
	tlstest.Renew(t, renewed.CertFile, cert)
	tlstest.Renew(t, renewed.KeyFile, key)
	if err := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	// A connection killed may fail one call (its retry is go-redis's); the new ones must work.
	testenv.Eventually(t, 5*time.Second, "a connection with the renewed certificate", func() bool {
		err = rdb.Ping(ctx).Err()
		return err == nil
	}, func() string { return fmt.Sprint(err) })
}

// A CA file changed on disk is trusted from the next connection on: here Redis comes to
// present a certificate of a new CA, the client's CA file is rotated to the new CA, and the
// client's connections are closed. Read once at start, every connection after was refused
// ("unknown authority") until a restart.
func TestARotatedCAFileIsTrustedOnTheNextConnection(t *testing.T) {
	ctx := context.Background()
	first := tlstest.NewCA(t, "first")
	rs := redistest.Start(t, redistest.WithTLS(first))
	admin := rs.Client(t) // its connection, made now, outlives the change of certificate
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	tlstest.Renew(t, rs.CA, caFile)
	rdb, err := redisconn.Options{URL: rs.URL(), CA: caFile, Cert: rs.ClientCert.CertFile, Key: rs.ClientCert.KeyFile}.Client("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("with the first CA: %v", err)
	}

	second := tlstest.NewCA(t, "second")
	server := second.Server(t, "redis-server")
	if err := admin.Do(ctx, "CONFIG", "SET", "tls-cert-file", server.CertFile, "tls-key-file", server.KeyFile).Err(); err != nil {
		t.Fatal(err)
	}
	tlstest.Renew(t, second.CertFile, caFile)
	if err := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "a connection that trusts the new CA", func() bool {
		err = rdb.Ping(ctx).Err()
		return err == nil
	}, func() string { return fmt.Sprint(err) })
}
