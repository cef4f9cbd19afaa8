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
	"sigs.k8s.io/yaml"
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

// LameDuck stops server i as Kubernetes stops a pod of the scale-out manifests: the manifest's
// own preStop command (a shell that signals lame duck mode through the pid file, then waits for
// the server to exit), then SIGTERM. It kills the
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
	command := manifestPreStop(c.t, c.bin, c.pidFile(i))
	preStop := exec.Command(command[0], command[1:]...)
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

// natsManifest is the scale-out manifest whose NATS preStop LameDuck runs.
const natsManifest = "deploy/overlays/scale-out/nats-cluster.yaml"

// manifestPreStop is the preStop command of the manifest's NATS container, made to run here:
// its nats-server is bin, its process id file (the container's --pid) pidFile.
func manifestPreStop(t testing.TB, bin, pidFile string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), natsManifest))
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name      string   `json:"name"`
						Args      []string `json:"args"`
						Lifecycle struct {
							PreStop struct {
								Exec struct {
									Command []string `json:"command"`
								} `json:"exec"`
							} `json:"preStop"`
						} `json:"lifecycle"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &set); err != nil {
		t.Fatalf("natstest: %s: %v", natsManifest, err)
	}
	for _, ct := range set.Spec.Template.Spec.Containers {
		command := ct.Lifecycle.PreStop.Exec.Command
		if ct.Name != "nats" || len(command) == 0 {
			continue
		}
		var pid string
		for _, a := range ct.Args {
			if v, ok := strings.CutPrefix(a, "--pid="); ok {
				pid = v
			}
		}
		if pid == "" {
			t.Fatalf("natstest: the nats container of %s writes no --pid file", natsManifest)
		}
		out := make([]string, len(command))
		for i, part := range command {
			part = strings.ReplaceAll(part, pid, pidFile)
			if rest, ok := strings.CutPrefix(part, "nats-server"); ok {
				part = bin + rest
			}
			out[i] = part
		}
		return out
	}
	t.Fatalf("natstest: %s has no nats container with a preStop command", natsManifest)
	return nil
}

// URLs is every server's client URL, comma-separated, as NATS_URL takes them.
func (c *ProcessCluster) URLs() string { return strings.Join(c.urls, ",") }

// URLsBut is the client URLs of every server but s, comma-separated.
func (c *ProcessCluster) URLsBut(s *testenv.Proc) string {
	var urls []string
	for i, srv := range c.Servers {
		if srv != s {
			urls = append(urls, c.urls[i])
		}
	}
	return strings.Join(urls, ",")
}

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
