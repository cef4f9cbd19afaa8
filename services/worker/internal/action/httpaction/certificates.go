package httpaction

import (
	"container/list"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/resched/resched/services/internal/pfx"
	"github.com/resched/resched/services/worker/internal/action"
)

// certCache keeps, per client certificate, a client whose transport presents it: decoding a
// PFX costs a key derivation, and a transport of its own keeps that certificate's
// connections alive across deliveries. It is a cache (per-process state) because both are
// expensive to rebuild on every delivery; it is bounded, least recently used first out.
type certCache struct {
	base *http.Transport
	max  int

	mu      sync.Mutex
	entries map[[sha256.Size]byte]*list.Element // of *certEntry
	lru     *list.List                          // front: most recently used
}

type certEntry struct {
	key    [sha256.Size]byte
	client *http.Client
}

func newCertCache(base *http.Transport, max int) *certCache {
	return &certCache{base: base, max: max, entries: map[[sha256.Size]byte]*list.Element{}, lru: list.New()}
}

// client returns the client presenting the certificate of a base64 PFX and its password. A
// PFX that cannot be read fails permanently: retrying the same bytes cannot help.
func (c *certCache) client(pfx, password string) (*http.Client, error) {
	// The key is a digest, so the cache holds no password in a map key; the decoded private
	// key lives in the transport, as it must.
	key := sha256.Sum256([]byte(pfx + "\x00" + password))
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.lru.MoveToFront(e)
		client := e.Value.(*certEntry).client
		c.mu.Unlock()
		return client, nil
	}
	c.mu.Unlock()

	cert, err := decodePFX(pfx, password)
	if err != nil {
		return nil, action.Permanent(err)
	}
	t := c.base.Clone()
	t.TLSClientConfig = c.base.TLSClientConfig.Clone()
	t.TLSClientConfig.Certificates = []tls.Certificate{cert}
	client := newClient(t)

	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok { // decoded meanwhile by another delivery
		t.CloseIdleConnections()
		c.lru.MoveToFront(e)
		return e.Value.(*certEntry).client, nil
	}
	c.entries[key] = c.lru.PushFront(&certEntry{key: key, client: client})
	for c.lru.Len() > c.max {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		e := oldest.Value.(*certEntry)
		delete(c.entries, e.key)
		e.client.CloseIdleConnections()
	}
	return client, nil
}

func (c *certCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*certEntry).client.CloseIdleConnections()
	}
}

// decodePFX reads a base64 PKCS #12 file into a TLS certificate with its chain.
func decodePFX(b64, password string) (tls.Certificate, error) {
	if b64 == "" {
		return tls.Certificate{}, errors.New("ClientCertificate authentication without a pfx")
	}
	cert, err := pfx.Decode(b64, password)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ClientCertificate: the pfx %w", err)
	}
	return cert, nil
}
