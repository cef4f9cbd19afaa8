package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MasterName is the name the test sentinels monitor the master under.
const MasterName = "resched"

// Sentinel is a master, its replica and three sentinels watching them, on loopback ports.
type Sentinel struct {
	Master, Replica *Server
	Sentinels       []*Server
	t               testing.TB
	racks           racks // with Splittable
}

// StartSentinel starts the set and waits until every sentinel knows the master, its replica and
// the other sentinels, and the replica has ended its first sync.
func StartSentinel(t testing.TB, opts ...SetOption) *Sentinel {
	t.Helper()
	var layout setLayout
	for _, o := range opts {
		o(&layout)
	}
	s := &Sentinel{t: t, racks: racks{t: t}}
	place := func(sentinel bool) []Option {
		switch {
		case !layout.splittable:
			return nil
		case sentinel:
			return []Option{s.racks.own()}
		}
		return []Option{s.racks.fronted("")}
	}
	s.Master = Start(t, append(place(false), WithPersistence())...)
	s.racks.add(s.Master)
	host, port, _ := strings.Cut(s.Master.Addr, ":")
	s.Replica = Start(t, append(place(false), WithPersistence(), WithArgs("--replicaof", host, port))...)
	s.racks.add(s.Replica)
	for range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		// A sentinel rewrites its configuration file: it must be its own and writable.
		text := fmt.Sprintf("sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			MasterName, host, port, MasterName, MasterName, MasterName)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		sen := Start(t, append(place(true), WithArgs("--sentinel"), withConfigFile(conf))...)
		s.racks.add(sen)
		s.Sentinels = append(s.Sentinels, sen)
	}
	s.waitKnown()
	return s
}

// Split cuts the nodes named off from the others, until Heal, as Cluster.Split does. The set
// must have been started Splittable.
func (s *Sentinel) Split(off ...*Server) { s.t.Helper(); s.racks.split(off...) }

// Heal ends a Split.
func (s *Sentinel) Heal() { s.racks.heal() }

// withConfigFile puts a configuration file first, as redis-server wants it.
func withConfigFile(path string) Option {
	return func(s *Server) { s.conf = path }
}

// URL is the redis+sentinel:// URL of the sentinels, the master's name and database 0.
func (s *Sentinel) URL() string {
	var addrs []string
	for _, n := range s.Sentinels {
		addrs = append(addrs, n.Addr)
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + MasterName + "/0"
}

// CurrentMaster is the data node the sentinels name as master now.
func (s *Sentinel) CurrentMaster() *Server {
	s.t.Helper()
	for _, sen := range s.Sentinels {
		if !sen.Running() {
			continue
		}
		addr, err := sen.do("SENTINEL", "get-master-addr-by-name", MasterName)
		if err != nil {
			continue
		}
		a := strings.Trim(addr, "[]")
		hostPort := strings.Replace(a, " ", ":", 1)
		for _, n := range []*Server{s.Master, s.Replica} {
			if n.Addr == hostPort {
				return n
			}
		}
	}
	s.t.Fatal("redistest: no sentinel names a master")
	return nil
}

func (s *Sentinel) waitKnown() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := s.Replica.synced()
		for _, sen := range s.Sentinels {
			info, err := sen.do("SENTINEL", "master", MasterName)
			if err != nil || !strings.Contains(info, "num-other-sentinels 2") || !strings.Contains(info, "num-slaves 1") {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatal("redistest: the sentinels do not know each other and the synced replica after 30 s")
		}
		time.Sleep(100 * time.Millisecond) // polling child processes
	}
}
