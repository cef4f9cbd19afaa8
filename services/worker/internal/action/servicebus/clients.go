package servicebus

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// clients keeps one azservicebus client per namespace endpoint and shared access key, and one
// sender per entity of each: a connection, its CBS handshakes and its links are set up once
// and serve every later delivery. A key is part of the identity, so two jobs holding different
// keys for one namespace (one of them stale) do not disturb each other; a client nobody used
// for idleTimeout (a rotated key, a namespace no job names any more) is closed, so the cache
// stays as small as the set of namespaces in use.
type clients struct {
	options     *azservicebus.ClientOptions
	idleTimeout time.Duration
	now         func() time.Time

	mu     sync.Mutex
	byKey  map[clientKey]*namespaceClient
	closed bool
}

// clientKey identifies a client; the key itself is kept only as a hash.
type clientKey struct {
	endpoint, keyName string
	keyHash           [sha256.Size]byte
}

type namespaceClient struct {
	client   *azservicebus.Client
	senders  map[string]*azservicebus.Sender
	lastUsed time.Time
}

var errClosed = errors.New("the Service Bus deliverer is closed")

// closeTimeout bounds closing an idle client in the background.
const closeTimeout = 30 * time.Second

func newClients(options *azservicebus.ClientOptions, idleTimeout time.Duration) *clients {
	return &clients{options: options, idleTimeout: idleTimeout, now: time.Now, byKey: map[clientKey]*namespaceClient{}}
}

// sender returns the cached sender of the entity, making the client and sender on first use.
func (c *clients) sender(endpoint, keyName, key, entity, connStr string) (*azservicebus.Sender, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	now := c.now()
	c.evictIdle(now)
	k := clientKey{endpoint, keyName, sha256.Sum256([]byte(key))}
	nc := c.byKey[k]
	if nc == nil {
		client, err := azservicebus.NewClientFromConnectionString(connStr, c.optionsFor(endpoint))
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		nc = &namespaceClient{client: client, senders: map[string]*azservicebus.Sender{}}
		c.byKey[k] = nc
	}
	nc.lastUsed = now
	s := nc.senders[entity]
	if s == nil {
		var err error
		if s, err = nc.client.NewSender(entity, nil); err != nil {
			return nil, fmt.Errorf("sender: %w", err)
		}
		nc.senders[entity] = s
	}
	return s, nil
}

// optionsFor are the client options for a namespace at endpoint (sb://host[:port]), with a TLS
// configuration of its own that names the host. The SDK gives go-amqp the endpoint's host and
// port as the TLS server name, so a certificate was never valid for an endpoint with a port,
// and go-amqp writes that name into the configuration it is given: shared by every client, the
// first namespace's name would have been checked against every other's certificate.
func (c *clients) optionsFor(endpoint string) *azservicebus.ClientOptions {
	o := *c.options
	if o.TLSConfig != nil {
		o.TLSConfig = o.TLSConfig.Clone()
	} else {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	o.TLSConfig.ServerName = hostOf(endpoint)
	return &o
}

// hostOf is the host of an endpoint sb://host[:port][/], without its port.
func hostOf(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	return u.Hostname()
}

// evictIdle closes, in the background, the clients unused since before now-idleTimeout.
func (c *clients) evictIdle(now time.Time) {
	for k, nc := range c.byKey {
		if now.Sub(nc.lastUsed) < c.idleTimeout {
			continue
		}
		delete(c.byKey, k)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			_ = nc.close(ctx)
		}()
	}
}

// len is the number of cached clients.
func (c *clients) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// close closes every sender and client; later calls to sender fail.
func (c *clients) close(ctx context.Context) error {
	c.mu.Lock()
	all := c.byKey
	c.byKey, c.closed = nil, true
	c.mu.Unlock()
	var errs []error
	for _, nc := range all {
		errs = append(errs, nc.close(ctx))
	}
	return errors.Join(errs...)
}

func (nc *namespaceClient) close(ctx context.Context) error {
	var errs []error
	for _, s := range nc.senders {
		errs = append(errs, s.Close(ctx))
	}
	errs = append(errs, nc.client.Close(ctx))
	return errors.Join(errs...)
}
