package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// The distributed engines users run, each losing a node while jobs fire every second: a
// Redis Cluster and a Sentinel set lose their master (a replica takes over), a JetStream
// cluster loses the server leading the due stream; a planner is killed in each. Then, on one
// server of each, the faults between them: a planner cut off from NATS or from Redis, a
// worker killed with deliveries in hand. Every occurrence must still be delivered (once, or
// again after a fault that explains it) or recorded, none skipped, few seconds late.

// topologyGroups are the jobs of the topology runs: 40 jobs every second.
var topologyGroups = []group{{20, 1, ""}, {20, 1, "All"}}

const topologySpan = 30 * time.Second

// killPlannerAt kills planner-1 at a time and starts it again two seconds later.
func killPlannerAt(c *cluster, s *schedule, at time.Duration) {
	s.at(at, "kill -9 planner-1", func() { c.killPlanner(1) })
	s.at(at+2*time.Second, "start planner-1", func() { c.startPlanner(1) })
}

func TestRedisClusterFailover(t *testing.T) {
	rc := startCluster(t)
	loseRedisMaster(t, masterLoss{name: "redis cluster", url: rc.URL(), master: func() *redistest.Server { return rc.MasterOf("resched:{p00}:due") }})
}

func TestRedisSentinelFailover(t *testing.T) {
	rs := startSentinel(t)
	loseRedisMaster(t, masterLoss{name: "redis sentinel", url: rs.URL(), master: rs.CurrentMaster})
}

// masterLoss is a Redis master lost in a topology run: killed, or paused with SIGSTOP (hang).
type masterLoss struct {
	name   string
	url    string
	master func() *redistest.Server
	hang   bool
	env    []string // the planners' settings besides the run's own
}

// loseRedisMaster runs the topology jobs and loses the master at 8 s. A killed master is
// started again at 22 s (a replica by then), and planner-1 is killed at 15 s besides; a hung
// one goes on at 22 s, and its run has a bar of 7 s on lateness.
func loseRedisMaster(t *testing.T, m masterLoss) {
	n := natstest.Start(t)
	var lost *redistest.Server
	p := profile{name: m.name, planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			how := "kill -9"
			if m.hang {
				how = "SIGSTOP"
			}
			s.at(8*time.Second, how+" the Redis master of partition 0", func() {
				lost = m.master()
				c.timeline.add(time.Now(), redisFailover, lost.Addr)
				if m.hang {
					lost.Pause()
				} else {
					lost.Kill()
				}
			})
			if m.hang {
				s.at(22*time.Second, "SIGCONT the hung master", func() { lost.Resume() })
				return
			}
			killPlannerAt(c, s, 15*time.Second)
			s.at(22*time.Second, "start the lost master again", func() { lost.Start() })
		}}
	if m.hang {
		p.lateBound = 7 * time.Second
	}
	runProfile(t, p, backends{redisURL: m.url, natsURL: n.ClientURL(), replicas: 1, connect: n.Connect, plannerEnv: m.env})
}

// startCluster and startSentinel start the Redis set of a topology run, which `go test -short`
// skips.
func startCluster(t *testing.T) *redistest.Cluster {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	return redistest.StartCluster(t, 3, 1)
}

func startSentinel(t *testing.T) *redistest.Sentinel {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	return redistest.StartSentinel(t)
}

// A planner cut off from NATS while Redis is still in reach (its network, or the one server
// it was given, lost) publishes nothing. It used to renew its leases all the same, so its
// share of the jobs waited the cut out (14 s here, against the bar of 10 s); it now lets its
// partitions go to a planner that can publish.
func TestPlannerCutOffFromNATS(t *testing.T) {
	cutPlannerOff(t, "nats")
}

// A planner cut off from Redis while NATS is still in reach: its leases run out, the other
// takes its partitions; it moves nothing meanwhile, and once back it finds it lived through
// the gap (no outage recorded) and takes its share again.
func TestPlannerCutOffFromRedis(t *testing.T) {
	cutPlannerOff(t, "redis")
}

// A worker killed with deliveries in hand: the target answers after 2 s, so at the kill the
// worker holds about forty. They go to the other worker after the AckWait: each reaches the
// target twice (a duplicate the run explains by the kill), and history and executionCount must
// still agree with what the target received: each delivery the kill cut short has an entry
// of its own (60 of 60 when first run).
func TestWorkerKilledWithDeliveriesInHand(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	back := single(t)
	back.targetDelay = 2 * time.Second
	runProfile(t, profile{name: "worker killed with deliveries in hand", planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "kill -9 worker-1", func() { c.killWorker(1) })
			s.at(10*time.Second, "start worker-1", func() { c.startWorker(1) })
		}},
		back)
}

// A planner's link to NATS hangs rather than breaks (its server frozen, packets dropped
// without a reset): the connection stays open and nothing answers, so the client notices only
// by its pings. With nats.go's default pings (every 2 min) the planner kept its leases through
// the 14 s and its jobs were 13.5 s late; it now gives the connection up after about 3 s and
// its partitions a lease later (measured 6.5 s late).
func TestPlannerLinkToNATSHangs(t *testing.T) {
	linkFault(t, "nats", true)
}

// A planner's link to Redis hangs: its lease calls end at their 1 s deadlines, its leases run
// out, and the other planner takes its partitions. In `make chaos` only (measured 1.8 s late).
func TestPlannerLinkToRedisHangs(t *testing.T) {
	fullRunOnly(t)
	linkFault(t, "redis", true)
}

// fullRunOnly skips a fault run outside `make chaos` (RESCHED_CHAOS=full), to keep `make test`
// short.
func fullRunOnly(t *testing.T) {
	if os.Getenv("RESCHED_CHAOS") != "full" {
		t.Skip("a fault run of `make chaos`")
	}
}

// A worker's link to NATS hangs with deliveries in hand (the target answers after 1 s): it
// gives the connection up after two unanswered pings and reconnects once the link comes back;
// what it held reaches the target again after the AckWait, from the other worker, and history
// and executionCount must still agree with the target. The target answers after 1 s, not 2 s
// as when a worker is killed: one worker then carries the 40 jobs a second alone (64 at once),
// where at 2 s it could not (32 a second), and its backlog over the 14 s made them up to 9.5 s
// late. In `make chaos` only.
func TestWorkerLinkToNATSHangs(t *testing.T) {
	fullRunOnly(t)
	back := single(t)
	back.targetDelay = time.Second
	link := testenv.StartProxy(t, back.nats.Addr().String())
	back.workerNATS = func(i int) string {
		if i == 1 {
			return "nats://" + link.Addr()
		}
		return back.natsURL
	}
	runProfile(t, profile{name: "worker link to nats hangs", planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "freeze worker-1's link to nats", func() {
				c.timeline.add(time.Now(), workerHung, "worker-1")
				link.Freeze()
			})
			s.at(22*time.Second, "thaw worker-1's link to nats", link.Thaw)
		}},
		back)
}

// cutPlannerOff runs two planners on one Redis and one NATS server, planner-1's links to those
// named in from ("nats", "redis", or "nats and redis") through proxies, cut from 8 s to 22 s.
func cutPlannerOff(t *testing.T, from string) { linkFault(t, from, false) }

// linkFault is cutPlannerOff, with the links frozen rather than cut when freeze is set.
func linkFault(t *testing.T, from string, freeze bool) {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	back := single(t)
	var links []*testenv.Proxy
	natsURL, redisURL := back.natsURL, back.redisURL
	if strings.Contains(from, "nats") {
		l := testenv.StartProxy(t, back.nats.Addr().String())
		links, natsURL = append(links, l), "nats://"+l.Addr()
	}
	if strings.Contains(from, "redis") {
		l := testenv.StartProxy(t, back.redis.Addr)
		links, redisURL = append(links, l), "redis://"+l.Addr()+"/0"
	}
	back.plannerURLs = func(i int) (string, string) {
		if i != 1 {
			return back.natsURL, back.redisURL
		}
		return natsURL, redisURL
	}
	each := func(f func(*testenv.Proxy)) func() {
		return func() {
			for _, l := range links {
				f(l)
			}
		}
	}
	runProfile(t, profile{name: "planner cut off from " + from, planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			if freeze {
				s.at(8*time.Second, "freeze planner-1's link to "+from, func() {
					c.timeline.add(time.Now(), linkCut, "planner-1")
					each((*testenv.Proxy).Freeze)()
				})
				s.at(22*time.Second, "thaw planner-1's link to "+from, each((*testenv.Proxy).Thaw))
				return
			}
			s.at(8*time.Second, "cut planner-1 off from "+from, func() {
				c.timeline.add(time.Now(), linkCut, "planner-1")
				each((*testenv.Proxy).Cut)()
			})
			s.at(22*time.Second, "mend planner-1's link to "+from, each((*testenv.Proxy).Mend))
		}},
		back)
}

// A planner cut off from NATS and Redis at once (its own network lost): it can neither renew
// its leases nor publish; the other planner takes its partitions once the leases run out, and
// it takes its share again once back. In `make chaos` only.
func TestPlannerCutOffFromNATSAndRedis(t *testing.T) {
	fullRunOnly(t)
	cutPlannerOff(t, "nats and redis")
}

// In `make chaos` only: TestNATSClusterStreamLeaderHangs, in `make test`, loses the leader too.
func TestNATSClusterStreamLeaderLoss(t *testing.T) {
	fullRunOnly(t)
	nc := natstest.StartCluster(t, 3)
	var lost *natstest.Server
	onNATSCluster(t, "nats cluster", nc.URLs(), func(c *cluster, s *schedule) {
		s.at(8*time.Second, "kill the NATS server leading the due stream", func() {
			lost = nc.StreamLeader(c.jetStream(), "SCHEDULER_DUE")
			c.timeline.add(time.Now(), natsLoss, fmt.Sprint(lost))
			lost.Kill()
		})
		killPlannerAt(c, s, 15*time.Second)
		s.at(22*time.Second, "start the lost NATS server again", func() { lost.Revive() })
	})
}

// A rolling restart of the NATS cluster, as `kubectl rollout restart` does it to the
// scale-out manifests' StatefulSet: each nats-server process in turn gets the pods' preStop
// (lame duck mode through its process id file) and SIGTERM, with the lame duck settings of
// deploy/base/nats.conf; it hands its leaderships over, closes its clients' connections and
// exits, and is started again, the next once the streams' replicas are current. A planner is
// killed besides. In `make chaos` only.
func TestNATSClusterRollingRestart(t *testing.T) {
	fullRunOnly(t)
	nc := natstest.StartProcessCluster(t, 3, "-c", deployedLameDuck(t))
	onNATSClusterFor(t, "nats cluster rolling restart", nc.URLs(), 60*time.Second, func(c *cluster, s *schedule) {
		for i, at := range []time.Duration{4 * time.Second, 22 * time.Second, 40 * time.Second} {
			name := fmt.Sprint("n", i)
			s.at(at, "stop NATS server "+name+" as Kubernetes stops its pod", func() {
				c.timeline.add(time.Now(), natsLoss, name)
				took, lameDuck := nc.LameDuck(i, podGrace)
				t.Logf("%s %s stopped %v after its preStop", time.Now().Format("15:04:05.000"), name, took.Round(time.Millisecond))
				if !lameDuck {
					t.Errorf("%s stopped without entering lame duck mode: the SIGTERM came first", name)
				}
				nc.Servers[i].Restart(t)
				if !waitStreamsCurrent(c.jetStream(), "SCHEDULER_DUE", "SCHEDULER_RESULTS", "SCHEDULER_JOBS") {
					t.Errorf("the streams' replicas are not current after %s's restart", name)
				}
				t.Logf("%s %s back, the streams current", time.Now().Format("15:04:05.000"), name)
			})
		}
		killPlannerAt(c, s, 10*time.Second)
	})
}

// podGrace is the NATS pods' terminationGracePeriodSeconds (deploy/base/nats.yaml); deploy's
// manifest checks hold the lame duck settings to it.
const podGrace = 60 * time.Second

// deployedLameDuck writes a nats-server configuration of the lame duck settings of
// deploy/base/nats.conf alone (the rest asks for users these runs do not have).
func deployedLameDuck(t *testing.T) string {
	conf, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "deploy", "base", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.Lines(string(conf)) {
		if strings.HasPrefix(line, "lame_duck_") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("deploy/base/nats.conf sets %d lame duck settings, want its duration and grace period: %q", len(lines), lines)
	}
	path := filepath.Join(t.TempDir(), "lame-duck.conf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// onNATSCluster runs the topology jobs on one Redis and the NATS cluster at urls (its streams
// of three replicas), with faults.
func onNATSCluster(t *testing.T, name, urls string, faults func(*cluster, *schedule)) {
	onNATSClusterFor(t, name, urls, topologySpan, faults)
}

// onNATSClusterFor is onNATSCluster with jobs that fire over span.
func onNATSClusterFor(t *testing.T, name, urls string, span time.Duration, faults func(*cluster, *schedule)) {
	r := redistest.Start(t, redistest.WithPersistence())
	runProfile(t, profile{name: name, planners: 2, workers: 2, groups: topologyGroups, span: span, faults: faults},
		backends{redisURL: r.URL(), natsURL: urls, replicas: 3, connect: func(tb testing.TB) *nats.Conn { return connectAll(tb, urls) }})
}

// A JetStream server that hangs rather than dies, the one leading the due stream (its host
// frozen): its clients' connections stay open and nothing answers, and its routes too. The
// others elect a new leader; planners and workers on the hung server give their connections up
// by their pings and reconnect to another. The publishes sent to the hung leader are never
// acknowledged: before a round sent them again after 2 s without an acknowledgement, each
// round waited out its 30 s, and 880 of the run's 1,240 occurrences had not fired by its end.
func TestNATSClusterStreamLeaderHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	nc := natstest.StartProcessCluster(t, 3)
	var hung *testenv.Proc
	onNATSCluster(t, "nats cluster leader hangs", nc.URLs(), func(c *cluster, s *schedule) {
		s.at(8*time.Second, "SIGSTOP the NATS server leading the due stream", func() {
			hung = nc.StreamLeader(c.jetStream(), "SCHEDULER_DUE")
			c.timeline.add(time.Now(), natsLoss, hung.Name)
			hung.Pause(t)
			// The others elect a leader once they miss the hung one's heartbeats: seconds
			// that are JetStream's, longer on a loaded host, and not the services' to cut.
			watchDueLeader(c, nc.URLsBut(hung), 30*time.Second)
		})
		s.at(22*time.Second, "SIGCONT the hung NATS server", func() { hung.Resume(t) })
	})
}

// A NATS server cut off from the other servers of its cluster (a network partition between
// their machines) while its clients stay connected to it and it answers their pings: the one
// planner-1 is connected to. Nothing can be stored through it (the due stream's quorum is on
// the other side), and no consumer answers through it. Before the services watched JetStream
// through their connections, planner-1 kept its leases and published nothing, and the workers
// on that server delivered nothing, until the cut healed: occurrences up to 20.6 s late.
func TestNATSClusterServerCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	nc := natstest.StartPartitionableCluster(t, 3)
	cut := -1
	onNATSCluster(t, "nats server cut off", nc.URLs(), func(c *cluster, s *schedule) {
		s.at(8*time.Second, "cut planner-1's NATS server off from the others", func() {
			// The planner's connection is named with its id, which holds its process id.
			cut = nc.Hosting(fmt.Sprintf("-%d-", c.planners[1].PID()))
			c.timeline.add(time.Now(), linkCut, "planner-1")
			c.timeline.add(time.Now(), natsLoss, fmt.Sprint("n", cut, " cut off"))
			nc.Isolate(cut)
			// When the server cut off led the due stream, the others elect a leader of their
			// own once they miss its heartbeats, seconds that are JetStream's as in the hung
			// leader's run. So the stream is watched from their side, from the cut to 30 s
			// after it heals.
			watchDueLeader(c, nc.URLsBut(cut), 44*time.Second)
		})
		s.at(22*time.Second, "let the server route to the others again", func() {
			// It has called elections of its own meanwhile, so its return makes the cluster
			// elect its leaders again: an acknowledgement not yet replicated is lost, and a
			// result not stored meanwhile has its attempt run again. That lasts seconds, so
			// its end is marked too.
			c.timeline.add(time.Now(), natsLoss, fmt.Sprint("n", cut, " rejoins"))
			nc.Rejoin(cut)
			go func() {
				if waitStreamsCurrent(c.jetStream(), "SCHEDULER_DUE", "SCHEDULER_RESULTS", "SCHEDULER_JOBS") {
					c.timeline.add(time.Now(), natsLoss, fmt.Sprint("n", cut, " current again"))
					t.Logf("%s the streams' replicas are current again", time.Now().Format("15:04:05.000"))
				}
			}()
		})
	})
}

// watchDueLeader records in the timeline when the due stream has no leader that can store (the
// services' own probe, natsconn.StreamLed), or the workers' consumer none that answers, as seen
// through the servers of urls, every 200 ms for the next d. Either is JetStream electing, for
// seconds the services wait out whatever they do: a cut-off server that rejoins has called
// elections of its own meanwhile, so the cluster elects its leaders again (8 s in one run),
// and a consumer whose leader was cut off is elected again on the other side (about 5 s in
// one run, its stream led all along, the workers' pulls finding no responder). The run's bound
// does not count that time.
func watchDueLeader(c *cluster, urls string, d time.Duration) {
	js, err := jetstream.New(connectAll(c.t, urls))
	if err != nil {
		c.t.Fatal(err)
	}
	probe := natsconn.StreamLed(js, "SCHEDULER_DUE")
	hasLeader := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if probe(ctx) != nil {
			return false
		}
		cons, err := js.Consumer(ctx, "SCHEDULER_DUE", bus.WorkerConsumer)
		if err != nil {
			return false
		}
		cl := cons.CachedInfo().Cluster
		return cl == nil || cl.Leader != ""
	}
	go func() {
		seen := true
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) { // polling the servers' state
			at := time.Now()
			if now := hasLeader(); now != seen {
				seen = now
				c.timeline.add(at, map[bool]eventKind{true: led, false: leaderless}[now], "SCHEDULER_DUE")
			}
		}
		if !seen {
			c.timeline.add(time.Now(), led, "SCHEDULER_DUE")
		}
	}()
}

// waitStreamsCurrent waits, 30 s at most, until each stream has a leader and every replica is
// current, looking once a second from a second on.
func waitStreamsCurrent(js jetstream.JetStream, streams ...string) bool {
	current := func() bool {
		for _, name := range streams {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := js.Stream(ctx, name)
			cancel()
			if err != nil {
				return false
			}
			cl := st.CachedInfo().Cluster
			if cl == nil || cl.Leader == "" {
				return false
			}
			for _, r := range cl.Replicas {
				if !r.Current || r.Offline {
					return false
				}
			}
		}
		return true
	}
	for range 30 {
		time.Sleep(time.Second) // polling the servers' state
		if current() {
			return true
		}
	}
	return false
}

// jetStream is the test's JetStream context.
func (c *cluster) jetStream() jetstream.JetStream {
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return js
}

// connectAll connects the test to a cluster, reconnecting to any server without limit.
func connectAll(t testing.TB, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// A Redis Cluster master that hangs rather than dies (a frozen virtual machine, a network
// dropping packets): its connections stay open and nothing answers, so every command to it
// waits for a time-out rather than failing at once. Its replica takes over after the node
// time-out. The partitions of the other masters must keep their leases meanwhile, and those of
// the hung one come back about as soon as after a master killed: before the Redis calls had
// deadlines of their own, their jobs were 10 to 12 s late, and some of the others' 10 s.
func TestRedisClusterMasterHangs(t *testing.T) {
	rc := startCluster(t)
	loseRedisMaster(t, masterLoss{name: "redis cluster master hangs", url: rc.URL(), hang: true,
		master: func() *redistest.Server { return rc.MasterOf("resched:{p00}:due") }})
}

// The Cluster master hangs while every write of jobs, collections and results waits for a
// replica (RESCHED_PLANNER_MIN_REPLICAS=1), each master with two replicas as operations.md
// asks: the promoted replica has the other, once it follows the new master, to answer its
// WAITs. In `make chaos` only.
func TestRedisClusterMasterHangsWithMinReplicas(t *testing.T) {
	fullRunOnly(t)
	rc := redistest.StartCluster(t, 3, 2)
	loseRedisMaster(t, masterLoss{name: "redis cluster master hangs, writes wait for a replica", url: rc.URL(), hang: true,
		master: func() *redistest.Server { return rc.MasterOf("resched:{p00}:due") },
		env:    []string{"RESCHED_PLANNER_MIN_REPLICAS=1"}})
}

// The Sentinel master hangs: every partition waits for the promotion, about 3 s here, and not
// much longer (measured 3.5 s). With a 2 s deadline on the dispatch calls it was 4.1 to 4.7 s:
// a claim begun on the hung master waited its deadline out past the promotion. With none, a
// claim ended at the client's read time-out, 3 s, which here fell just after the promotion.
// In `make chaos` only.
func TestRedisSentinelMasterHangs(t *testing.T) {
	fullRunOnly(t)
	rs := startSentinel(t)
	loseRedisMaster(t, masterLoss{name: "redis sentinel master hangs", url: rs.URL(), master: rs.CurrentMaster, hang: true})
}

// The Redis Cluster splits: the master of partition 0 is cut off from every other node, its
// replicas included, for 14 s, while the planners still reach every node (the split is between
// the Redis nodes' racks, not between the planners and Redis). It takes the planners' writes
// until it notices it is alone, a replica is promoted meanwhile, and once the split heals it
// follows that replica and drops what it took alone. At the default (RESCHED_PLANNER_MIN_REPLICAS
// auto, two replicas a master as docs/scaling.md asks) every write of results waits for a
// replica, so none of them is lost; with no wait (0) 36 history entries were, the results of
// the 2 s before the master split off noticed. In `make chaos` only (nine Redis nodes).
func TestRedisClusterSplit(t *testing.T) {
	fullRunOnly(t)
	rc := redistest.StartCluster(t, 3, 2, redistest.Splittable())
	splitRedis(t, "redis cluster split", rc.URL(), func() *redistest.Server { return rc.MasterOf("resched:{p00}:due") }, rc.Split, rc.Heal)
}

// The Sentinel master is cut off from its replica and the sentinels for 14 s, the planners
// still reaching it. Sentinel does not fence it: it takes every write sent to it, and the
// planners must follow the sentinels to the promoted replica rather than the master that still
// answers. At the default (auto) the old master's writes wait for its replica, which the split
// keeps from answering, so none counts; the promoted one has no replica until the split heals,
// and its writes wait for none. With no wait (0) 80 and 120 history entries were lost in two
// runs. In `make chaos` only.
func TestRedisSentinelSplit(t *testing.T) {
	fullRunOnly(t)
	rs := redistest.StartSentinel(t, redistest.Splittable())
	splitRedis(t, "redis sentinel split", rs.URL(), rs.CurrentMaster, rs.Split, rs.Heal)
}

// splitRedis runs the topology jobs, the planners at their default settings, and splits the
// master that master names off from the other nodes from 8 s to 22 s.
func splitRedis(t *testing.T, name, url string, master func() *redistest.Server, split func(...*redistest.Server), heal func()) {
	n := natstest.Start(t)
	p := profile{name: name, planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "split the Redis master of partition 0 off from the other nodes", func() {
				lost := master()
				c.timeline.add(time.Now(), redisFailover, lost.Addr)
				split(lost)
			})
			s.at(22*time.Second, "heal the split", heal)
		}}
	runProfile(t, p, backends{redisURL: url, natsURL: n.ClientURL(), replicas: 1, connect: n.Connect})
}

// The Redis Cluster is resharded while jobs fire, as an operator growing it does: a master is
// added, and every slot holding partitions of one master is moved to it, key by key, each slot
// half moved for a while (its commands redirected with ASK, or told TRYAGAIN when a script's
// keys are split between the two masters). In `make chaos` only.
func TestRedisClusterReshard(t *testing.T) {
	fullRunOnly(t)
	rc := redistest.StartCluster(t, 3, 1)
	n := natstest.Start(t)
	p := profile{name: "redis cluster resharded", planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "add a master and move to it the slots of the master of partition 0", func() {
				from := rc.MasterOf("resched:{p00}:due")
				to := rc.AddMaster()
				moved := 0
				for part := range 16 { // the planners' default partition count
					key := fmt.Sprintf("resched:{p%02d}:due", part)
					if rc.MasterOf(key) == from {
						rc.MoveSlot(rc.Slot(key), to, 50*time.Millisecond)
						moved++
					}
				}
				t.Logf("%s moved the slots of %d partitions", time.Now().Format("15:04:05.000"), moved)
			})
		}}
	runProfile(t, p, backends{redisURL: rc.URL(), natsURL: n.ClientURL(), replicas: 1, connect: n.Connect})
}
