// Package pfx reads the base64 PKCS #12 (PFX) files of ClientCertificate authentication: the
// planner checks them when a job is put, as Azure Scheduler did, and reports the certificate's
// thumbprint, subject and expiry; the worker presents them to targets.
package pfx

import (
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// ErrNotBase64 says the text is not base64.
var ErrNotBase64 = errors.New("is not base64")

// Decode reads a base64 PFX (white space ignored) into a TLS certificate with its chain. Its
// errors name the problem (not base64, a wrong password, an unknown algorithm), never the
// password.
func Decode(b64, password string) (tls.Certificate, error) {
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(b64), ""))
	if err != nil {
		return tls.Certificate{}, ErrNotBase64
	}
	if err := checkWork(der, password); errors.Is(err, errWrongPassword) {
		return tls.Certificate{}, fmt.Errorf("is not a PKCS #12 (PFX) file that this password opens: %w", err)
	} else if err != nil {
		return tls.Certificate{}, fmt.Errorf("is not a PKCS #12 (PFX) file that this scheduler opens: %w", err)
	}
	key, leaf, chain, err := pkcs12.DecodeChain(der, password)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("is not a PKCS #12 (PFX) file that this password opens: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
	for _, ca := range chain {
		cert.Certificate = append(cert.Certificate, ca.Raw)
	}
	return cert, nil
}

// Details are what the 2016-03-01 API tells of a job's client certificate.
type Details struct {
	Thumbprint  string // SHA-1 of the certificate, upper-case hex, as Windows shows it
	SubjectName string // the subject's distinguished name, "CN=…"
	Expiration  string // NotAfter, RFC 3339 UTC
}

// Describe returns the details of a leaf certificate.
func Describe(leaf *x509.Certificate) Details {
	sum := sha1.Sum(leaf.Raw)
	return Details{
		Thumbprint:  strings.ToUpper(hex.EncodeToString(sum[:])),
		SubjectName: leaf.Subject.String(),
		Expiration:  leaf.NotAfter.UTC().Format(time.RFC3339),
	}
}
