// Package certfile serves a TLS certificate from its PEM files, read again when they change
// (package reload), so that a certificate renewed on disk (cert-manager, certbot, a Kubernetes
// Secret refreshed in its mount) is used from the next handshake on, without a restart. Read
// once at start, a renewed certificate waited for the next restart, and the old one expired
// first.
package certfile

import (
	"crypto/tls"
	"fmt"

	"github.com/resched/resched/services/internal/reload"
)

// Pair is a certificate and its key, as files. Its methods are safe for concurrent use.
type Pair struct {
	value *reload.Value[*tls.Certificate]
}

// Load reads the pair. changed (nil: none) hears of each later change of the files: nil when
// the certificate was read again, the error when the files do not make a pair (a certificate
// written before its key): the certificate read before is then used until they change again.
func Load(certFile, keyFile string, changed func(error)) (*Pair, error) {
	v, err := reload.New(func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile) // its Leaf parsed too
		if err != nil {
			return nil, fmt.Errorf("certificate %s and key %s: %w", certFile, keyFile, err)
		}
		return &cert, nil
	}, changed, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &Pair{value: v}, nil
}

// Certificate is the pair's certificate, read again first when its files changed.
func (p *Pair) Certificate() *tls.Certificate { return p.value.Get() }

// GetCertificate is Certificate for tls.Config.GetCertificate (a server's).
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// GetClientCertificate is Certificate for tls.Config.GetClientCertificate (a client's).
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}
