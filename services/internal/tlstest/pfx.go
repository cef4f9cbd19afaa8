package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"math/big"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// PFX is a base64 PKCS#12 file holding a self-signed certificate ("resched test", valid 2020
// to 2030) and its key, sealed with password: what a ClientCertificate job carries.
func PFX(t testing.TB, password string) string {
	t.Helper()
	_, pfx := ClientCert(t, "resched test", password,
		time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	return pfx
}

// ClientCert makes a self-signed client certificate for cn, valid from notBefore to notAfter,
// and returns it with its PFX (base64 PKCS#12 of the certificate and its key, sealed with
// password). A TLS server that trusts the certificate accepts it as a client's.
func ClientCert(t testing.TB, cn, password string, notBefore, notAfter time.Time) (*x509.Certificate, string) {
	t.Helper()
	return clientCert(t, pkcs12.Modern, cn, password, notBefore, notAfter)
}

// PFXWithIterations is PFX with the key derivations of its MAC and encryption run iterations
// times each (2,048 by default).
func PFXWithIterations(t testing.TB, password string, iterations int) string {
	t.Helper()
	return PFXFrom(t, pkcs12.Modern.WithIterations(iterations), password)
}

// PFXFrom is PFX written by enc (go-pkcs12's encoders: its algorithms and counts).
func PFXFrom(t testing.TB, enc *pkcs12.Encoder, password string) string {
	t.Helper()
	_, pfx := clientCert(t, enc, "resched test", password,
		time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	return pfx
}

func clientCert(t testing.TB, enc *pkcs12.Encoder, cn, password string, notBefore, notAfter time.Time) (*x509.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pfx, err := enc.Encode(key, cert, nil, password)
	if err != nil {
		t.Fatal(err)
	}
	return cert, base64.StdEncoding.EncodeToString(pfx)
}
