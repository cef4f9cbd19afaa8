package natstest

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/testenv"
)

// ProcessCluster is a JetStream cluster of nats-server processes built from the module's
// nats-server, routed on loopback ports. Unlike Cluster, its servers can be paused with
// SIGSTOP: a server that hangs, its connections open and nothing answered, as a frozen host.
type ProcessCluster struct {
	Servers []*testenv.Proc
	urls    []string
	t       testing.TB
}

// StartProcessCluster starts n servers named n0… and waits until JetStream answers.
func StartProcessCluster(t testing.TB, n int) *ProcessCluster {
	t.Helper()
	bin := testenv.Build(t, "github.com/nats-io/nats-server/v2")
	dir := t.TempDir()
	c := &ProcessCluster{t: t}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats://" + testenv.FreeAddr(t)
	}
	for i := range n {
		addr := testenv.FreeAddr(t)
		host, port, _ := strings.Cut(addr, ":")
		name := "n" + strconv.Itoa(i)
		c.urls = append(c.urls, "nats://"+addr)
		c.Servers = append(c.Servers, testenv.Start(t, dir, name, filepath.Join(bin, "nats-server"), nil,
			"--name", name, "-a", host, "-p", port, "-js", "-sd", filepath.Join(dir, name),
			"--cluster_name", "resched", "--cluster", routes[i], "--routes", strings.Join(routes, ",")))
	}
	testenv.Eventually(t, 30*time.Second, "the JetStream cluster to answer", func() bool {
		nc, err := nats.Connect(c.URLs())
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err == nil
	}, c.Servers[0].Tail)
	return c
}

// URLs is every server's client URL, comma-separated, as NATS_URL takes them.
func (c *ProcessCluster) URLs() string { return strings.Join(c.urls, ",") }

// StreamLeader is the server that leads a stream now, asked through js.
func (c *ProcessCluster) StreamLeader(js jetstream.JetStream, stream string) *testenv.Proc {
	c.t.Helper()
	leader := streamLeader(c.t, js, stream)
	for _, s := range c.Servers {
		if s.Name == leader {
			return s
		}
	}
	c.t.Fatalf("natstest: stream %s is led by %q, not a server of the cluster", stream, leader)
	return nil
}
