package main

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// With -embedded-nats the planner runs its own JetStream server: a client connects to that
// address and uses the API; a stop shuts the server down too.
func TestEmbeddedNATS(t *testing.T) {
	rs := redistest.Start(t)
	addr := testenv.FreeAddr(t)
	cfg := testConfig("nats://127.0.0.1:1", rs.URL()) // NATS_URL is ignored in this mode
	cfg.EmbeddedNATS, cfg.EmbeddedNATSDir = addr, t.TempDir()
	base, _, stop := started(t, cfg)
	waitReady(t, base)
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatalf("connect to the embedded server: %v", err)
	}
	defer nc.Close()
	request(t, nc, "scheduler.api.collections.put.demo", `{"properties":{}}`)
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the embedded NATS server still listens after the planner stopped")
	}
}
