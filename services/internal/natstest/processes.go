package natstest

import (
	"context"
	"os"
	"os/exec"
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
	bin     string // nats-server
	dir     string // the servers' logs, stores and process id files
	t       testing.TB
}

// StartProcessCluster starts n servers named n0… and waits until JetStream answers. Each
// writes its process id to a file, as the scale-out manifests have it for their preStop
// (LameDuck). extra are flags every server is given besides (-c and a configuration file).
func StartProcessCluster(t testing.TB, n int, extra ...string) *ProcessCluster {
	t.Helper()
	bin := filepath.Join(testenv.Build(t, "github.com/nats-io/nats-server/v2"), "nats-server")
	dir := t.TempDir()
	c := &ProcessCluster{bin: bin, dir: dir, t: t}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats://" + testenv.FreeAddr(t)
	}
	for i := range n {
		addr := testenv.FreeAddr(t)
		host, port, _ := strings.Cut(addr, ":")
		name := "n" + strconv.Itoa(i)
		c.urls = append(c.urls, "nats://"+addr)
		args := append([]string{"--name", name, "-a", host, "-p", port, "-js", "-sd", filepath.Join(dir, name),
			"--cluster_name", "resched", "--cluster", routes[i], "--routes", strings.Join(routes, ","),
			"--pid", c.pidFile(i)}, extra...)
		c.Servers = append(c.Servers, testenv.Start(t, dir, name, bin, nil, args...))
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

func (c *ProcessCluster) pidFile(i int) string {
	return filepath.Join(c.dir, "n"+strconv.Itoa(i)+".pid")
}

// LameDuck stops server i as Kubernetes stops a pod of the scale-out manifests: their preStop
// (a shell that signals lame duck mode through the pid file, then waits for the server to
// exit; deploy's manifest checks hold the manifests to that shape), then SIGTERM. It kills the
// server after grace (the pods' terminationGracePeriodSeconds) with a test error, and returns
// how long the stop took and whether the server went through lame duck mode (its log says it
// entered it) rather than stopping at once. A server with no clients left ends its lame duck
// mode after handing its leaderships over.
func (c *ProcessCluster) LameDuck(i int, grace time.Duration) (time.Duration, bool) {
	c.t.Helper()
	entered := func() int {
		log, _ := os.ReadFile(c.Servers[i].Log)
		return strings.Count(string(log), "Entering lame duck mode")
	}
	before := entered()
	began := time.Now()
	pid := c.pidFile(i)
	preStop := exec.Command("/bin/sh", "-c", c.bin+" --signal ldm="+pid+` && while kill -0 "$(cat `+pid+`)" 2>/dev/null; do sleep 1; done`)
	done := make(chan []byte, 1)
	go func() { out, _ := preStop.CombinedOutput(); done <- out }()
	select {
	case out := <-done:
		if len(out) > 0 {
			c.t.Logf("natstest: the preStop of n%d said %s", i, out)
		}
	case <-time.After(grace):
		c.t.Errorf("natstest: the preStop of n%d outlasted the grace period %v", i, grace)
	}
	c.Servers[i].Stop(c.t, time.Second) // the kubelet's SIGTERM, once the preStop has returned
	return time.Since(began), entered() > before
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
