package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/tlstest"
)

// The gateway serves the certificate its files hold: renewed on disk (cert-manager, a
// Kubernetes Secret refreshed in its mount), it is served from the next handshake on, and one
// that cannot be read (a certificate without its key yet) is logged and the last one served.
// Read once at start, the old one was served until a restart, or until it expired.
func TestGatewayServesTheRenewedCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "gateway")
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	tlstest.Renew(t, first.CertFile, cert)
	tlstest.Renew(t, first.KeyFile, key)
	g := startGateway(t, map[string]string{"RESCHED_GATEWAY_TLS_CERT": cert, "RESCHED_GATEWAY_TLS_KEY": key})
	served := func() string { t.Helper(); return ca.ServedName(t, g.addr) }
	if got := served(); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
	tlstest.Renew(t, second.CertFile, cert)
	if got := served(); got != "first" {
		t.Fatalf("with the certificate renewed before its key, served %q, want first", got)
	}
	if !strings.Contains(g.logs.String(), "the TLS certificate changed on disk and cannot be read") {
		t.Errorf("no word of the pair that could not be read in:\n%s", g.logs.String())
	}
	tlstest.Renew(t, second.KeyFile, key)
	if got := served(); got != "second" {
		t.Fatalf("after the renewal, served %q, want second", got)
	}
}
