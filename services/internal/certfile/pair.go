// Package certfile serves a TLS certificate from its PEM files, and reads them again when they
// change, so that a certificate renewed on disk (cert-manager, certbot, a Kubernetes Secret
// refreshed in its mount) is used from the next handshake on, without a restart. Read once at
// start, a renewed certificate waited for the next restart, and the old one expired first.
package certfile

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Pair is a certificate and its key, as files. Its methods are safe for concurrent use.
type Pair struct {
	certFile, keyFile string
	onError           func(error)

	mu      sync.Mutex
	current *tls.Certificate
	loaded  stamp // the files as they were when current was read
	failed  stamp // the files as they were when reading them last failed
}

// stamp tells whether a file pair changed: each file's modification time and size. A mounted
// Secret is swapped whole (a symbolic link to a new directory), which os.Stat follows.
type stamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// Load reads the pair. onError (nil: none) hears of a later change that cannot be read (a
// certificate written before its key, a file half written): the pair then serves the
// certificate it has until the files change again.
func Load(certFile, keyFile string, onError func(error)) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile, onError: onError}
	st, err := p.stat()
	if err != nil {
		return nil, err
	}
	if p.current, err = p.read(); err != nil {
		return nil, err
	}
	p.loaded = st
	return p, nil
}

// Certificate is the pair's certificate, read again first when its files changed.
func (p *Pair) Certificate() *tls.Certificate {
	st, err := p.stat()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || st == p.loaded || st == p.failed {
		return p.current // a file missing for a moment while it is replaced: the last one
	}
	cert, err := p.read()
	if err != nil {
		p.failed = st
		if p.onError != nil {
			p.onError(err)
		}
		return p.current
	}
	p.current, p.loaded = cert, st
	return cert
}

// GetCertificate is Certificate for tls.Config.GetCertificate (a server's).
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// GetClientCertificate is Certificate for tls.Config.GetClientCertificate (a client's).
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

func (p *Pair) stat() (stamp, error) {
	c, err := os.Stat(p.certFile)
	if err != nil {
		return stamp{}, fmt.Errorf("certificate %s: %w", p.certFile, err)
	}
	k, err := os.Stat(p.keyFile)
	if err != nil {
		return stamp{}, fmt.Errorf("key %s: %w", p.keyFile, err)
	}
	return stamp{certMod: c.ModTime(), keyMod: k.ModTime(), certSize: c.Size(), keySize: k.Size()}, nil
}

func (p *Pair) read() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile) // its Leaf parsed too
	if err != nil {
		return nil, fmt.Errorf("certificate %s and key %s: %w", p.certFile, p.keyFile, err)
	}
	return &cert, nil
}
