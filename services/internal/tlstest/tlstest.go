// Package tlstest makes a private certificate authority for a test, and the server and client
// certificates it signs, as PEM files in the test's temporary directory: what an operator's
// own CA gives NATS, Redis and the services in production.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a private certificate authority.
type CA struct {
	CertFile string // the CA certificate, PEM: what clients and servers are told to trust
	dir      string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	serial   int64
}

// Pair is a certificate and its key, as PEM files.
type Pair struct{ CertFile, KeyFile string }

// NewCA makes a CA named "<name> CA". The name differs from its certificates' (often name
// too): OpenSSL takes a certificate whose issuer is its own subject for a self-signed one, and
// refuses it, so Python and Node clients could not be tested against such a pair.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca := &CA{dir: t.TempDir(), key: newKey(t)}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	ca.CertFile = ca.write(t, name+"-ca.pem", "CERTIFICATE", der)
	ca.serial = 1
	return ca
}

// Pool is a pool of the CA's certificate alone: what a client told to trust it holds.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Server issues a certificate for a server on the loopback interface (127.0.0.1, ::1,
// localhost).
func (ca *CA) Server(t testing.TB, name string) Pair {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate whose common name is name (what a server maps to a user).
func (ca *CA) Client(t testing.TB, name string) Pair {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

func (ca *CA) issue(t testing.TB, name string, tmpl *x509.Certificate) Pair {
	t.Helper()
	ca.serial++
	key := newKey(t)
	tmpl.SerialNumber = big.NewInt(ca.serial)
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return Pair{CertFile: ca.write(t, name+".pem", "CERTIFICATE", der), KeyFile: ca.write(t, name+"-key.pem", "PRIVATE KEY", keyDER)}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return k
}

func (ca *CA) write(t testing.TB, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	return path
}

// ServedName is the common name of the certificate the TLS server at addr presents, checked
// against the CA (for localhost), from a new connection.
func (ca *CA) ServedName(t testing.TB, addr string) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}
