package certfile_test

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/resched/resched/services/internal/certfile"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// A server serving a Pair hands out the certificate on disk: renewed in place, the next
// handshake gets the new one; a certificate written before its key keeps the old one (and
// says so once) until the key follows; files gone for a moment change nothing.
func TestServerHandsOutTheCertificateOnDisk(t *testing.T) {
	ca := tlstest.NewCA(t, "rotation")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	issued := []tlstest.Pair{ca.Server(t, "first"), ca.Server(t, "second"), ca.Server(t, "third")}
	tlstest.Renew(t, issued[0].CertFile, certFile)
	tlstest.Renew(t, issued[0].KeyFile, keyFile)
	var errs []error
	reads := 0
	pair, err := certfile.Load(certFile, keyFile, func(err error) {
		if err != nil {
			errs = append(errs, err)
		} else {
			reads++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{GetCertificate: pair.GetCertificate, MinVersion: tls.VersionTLS12}
	addr := testenv.ServeTCP(t, func(c net.Conn) {
		_ = tls.Server(c, cfg).Handshake()
		_ = c.Close()
	})
	served := func() string { t.Helper(); return ca.ServedName(t, addr) }
	if got := served(); got != "first" {
		t.Fatalf("served %q, want first", got)
	}

	tlstest.Renew(t, issued[1].CertFile, certFile)
	tlstest.Renew(t, issued[1].KeyFile, keyFile)
	if got := served(); got != "second" {
		t.Fatalf("after the renewal, served %q, want second", got)
	}

	tlstest.Renew(t, issued[2].CertFile, certFile) // its key not yet
	for range 2 {
		if got := served(); got != "second" {
			t.Fatalf("with the certificate written before its key, served %q, want second", got)
		}
	}
	if len(errs) != 1 || reads != 1 {
		t.Fatalf("errors %v, %d reads again: want the renewal said once, and the unreadable pair once", errs, reads)
	}
	tlstest.Renew(t, issued[2].KeyFile, keyFile)
	if got := served(); got != "third" {
		t.Fatalf("with the key written too, served %q, want third", got)
	}

	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "third" {
		t.Fatalf("with the certificate file gone, served %q, want the last one read", got)
	}
}

func TestLoadRefusesWhatIsNotAPair(t *testing.T) {
	ca := tlstest.NewCA(t, "load")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	if _, err := certfile.Load(a.CertFile, b.KeyFile, nil); err == nil {
		t.Error("a certificate with another's key was loaded")
	}
	if _, err := certfile.Load(a.CertFile, filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("a missing key was loaded")
	}
	p, err := certfile.Load(a.CertFile, a.KeyFile, nil)
	if err != nil || p.Certificate().Leaf == nil || p.Certificate().Leaf.Subject.CommonName != "a" {
		t.Fatalf("pair %v, %v: want a's certificate, parsed", p, err)
	}
}
