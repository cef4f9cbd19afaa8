package servicebus

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"
)

// TestClientsEvictIdle: a client unused for the idle time-out is dropped on the next use of the
// cache, while one in use stays. Clients connect lazily, so no broker is needed.
func TestClientsEvictIdle(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newClients(DefaultClientOptions(), time.Minute)
	c.now = func() time.Time { return now }
	defer c.close(context.Background())
	get := func(ns, key string) {
		t.Helper()
		connStr := "Endpoint=sb://" + ns + ";SharedAccessKeyName=k;SharedAccessKey=" + key + ";UseDevelopmentEmulator=true"
		if _, err := c.sender("sb://"+ns, "k", key, "q", connStr); err != nil {
			t.Fatal(err)
		}
	}
	cached := func() map[string]bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		names := map[string]bool{}
		for k := range c.byKey {
			for _, key := range []string{"a2V5", "b3RoZXI="} {
				if k.keyHash == sha256.Sum256([]byte(key)) {
					names[k.endpoint+" "+key] = true
				}
			}
		}
		return names
	}

	get("a", "a2V5")
	get("a", "a2V5")
	get("a", "b3RoZXI=") // another key: another client
	if got := cached(); len(got) != 2 || !got["sb://a a2V5"] || !got["sb://a b3RoZXI="] {
		t.Fatalf("cached %v, want a client per key", got)
	}
	now = now.Add(50 * time.Second)
	get("a", "a2V5") // keeps the first one fresh
	now = now.Add(30 * time.Second)
	get("b", "a2V5") // the second key's client has been idle 80 s: evicted
	if got := cached(); len(got) != 2 || !got["sb://a a2V5"] || !got["sb://b a2V5"] {
		t.Fatalf("cached %v after the idle time-out, want a with the first key, and b", got)
	}
}

// Each namespace's client gets a TLS configuration of its own naming its host without the
// port, the trusted CAs kept: the SDK named host:port, which no certificate is valid for, and
// go-amqp writes the name into the configuration it is given, which all clients shared.
func TestClientOptionsNameTheirHost(t *testing.T) {
	pool := x509.NewCertPool()
	shared := DefaultClientOptions()
	shared.TLSConfig = &tls.Config{RootCAs: pool}
	c := newClients(shared, time.Minute)
	for endpoint, want := range map[string]string{
		"sb://127.0.0.1:5671":                 "127.0.0.1",
		"sb://team-a.servicebus.windows.net/": "team-a.servicebus.windows.net",
		"sb://team-b.servicebus.windows.net":  "team-b.servicebus.windows.net",
		"sb://[::1]:5671":                     "::1",
	} {
		o := c.optionsFor(endpoint)
		if o.TLSConfig == shared.TLSConfig || o.TLSConfig.ServerName != want || o.TLSConfig.RootCAs != pool {
			t.Errorf("%s: server name %q (shared config: %v), want %q with the CAs", endpoint, o.TLSConfig.ServerName, o.TLSConfig == shared.TLSConfig, want)
		}
	}
	if shared.TLSConfig.ServerName != "" {
		t.Errorf("the shared configuration was changed: %q", shared.TLSConfig.ServerName)
	}
	if o := newClients(DefaultClientOptions(), time.Minute).optionsFor("sb://ns.example:5671"); o.TLSConfig == nil || o.TLSConfig.ServerName != "ns.example" || o.TLSConfig.RootCAs != nil {
		t.Errorf("without CAs: %+v, want the system's CAs and the host's name", o.TLSConfig)
	}
}
