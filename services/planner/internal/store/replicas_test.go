package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// With WithMinReplicas, a write the replica has not acknowledged is refused, not reported
// made: a result whose history entry a failover could lose is then not acknowledged in
// JetStream, and is applied again. Once the replica answers again, writes go through, and the
// replica holds them.
func TestWritesWaitForTheReplicas(t *testing.T) {
	ctx := context.Background()
	master := redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0")) // a replica syncs at once
	_, port, _ := net.SplitHostPort(master.Addr)
	replica := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
	mc := master.Client(t)
	s := store.New(mc, "test", store.WithMinReplicas(1, 200*time.Millisecond))
	loose := store.New(mc, "test") // the same data, without waiting
	firstWrite(t, s)
	putJob(t, s, "c", "j", t0)
	result := func(id string) store.Outcome { return outcome(id, 1, job.ExecutionFailed) }
	if _, err := s.ApplyResult(ctx, "c", "j", result("r1"), t0); err != nil {
		t.Fatalf("a result with the replica in sync: %v", err)
	}

	// The replica stops answering: it takes the writes into its socket, but acknowledges none.
	if err := syscall.Kill(replica.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(replica.PID(), syscall.SIGCONT)
		}
	}
	defer resume()
	if _, err := s.ApplyResult(ctx, "c", "j", result("r2"), t0); !errors.Is(err, store.ErrNotReplicated) {
		t.Fatalf("a result the replica did not acknowledge: %v, want ErrNotReplicated", err)
	}
	if _, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "c", Name: "k", Definition: []byte(`{}`), Accepted: t0, Next: t0,
		State: job.StateEnabled}); !errors.Is(err, store.ErrNotReplicated) {
		t.Fatalf("a job put the replica did not acknowledge: %v, want ErrNotReplicated", err)
	}
	if _, err := s.PutCollection(ctx, "d", []byte(`{}`), job.CollectionEnabled, 0, false); !errors.Is(err, store.ErrNotReplicated) {
		t.Fatalf("a collection put the replica did not acknowledge: %v, want ErrNotReplicated", err)
	}
	if _, err := loose.ApplyResult(ctx, "c", "j", result("r3"), t0); err != nil {
		t.Fatalf("without WithMinReplicas the same write goes through: %v", err)
	}

	resume()
	// r2 again, as JetStream redelivers it: it was written (on the master alone) and is not
	// recorded twice.
	if _, err := s.ApplyResult(ctx, "c", "j", result("r2"), t0); err != nil {
		t.Fatalf("the result again, the replica back: %v", err)
	}
	rc := store.New(replica.Client(t), "test")
	testenv.Eventually(t, 10*time.Second, "the replica to hold the three results once each", func() bool {
		h, err := rc.History(ctx, "c", "j", t0)
		if err != nil || len(h) != 3 {
			return false
		}
		seen := map[string]int{}
		for _, e := range h {
			seen[e.Message]++
		}
		return seen["r1"] == 1 && seen["r2"] == 1 && seen["r3"] == 1
	})
}

// On a Redis Cluster a write waits for the replica of the master that serves its keys: the WAIT
// goes on that master's connection, not to whichever node a keyless command would reach.
func TestClusterWritesWaitForTheirMastersReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	ctx := context.Background()
	rc := redistest.StartCluster(t, 3, 1)
	s := store.New(rc.Client(t), "test", store.WithMinReplicas(1, 200*time.Millisecond))
	firstWrite(t, s)
	putJob(t, s, "c", "j", t0)
	own := rc.MasterOf(fmt.Sprintf("test:{p%02d}:due", s.PartitionOf("c")))
	var mine, others []*redistest.Server
	for _, n := range rc.Nodes {
		if n == own {
			mine = rc.ReplicasOf(n)
		} else {
			others = append(others, rc.ReplicasOf(n)...)
		}
	}
	if len(mine) != 1 || len(others) != 2 {
		t.Fatalf("replicas: %d of the job's master, %d of the others; want 1 and 2", len(mine), len(others))
	}
	pause := func(nodes []*redistest.Server) (resume func()) {
		for _, n := range nodes {
			if err := syscall.Kill(n.PID(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		done := false
		resume = func() {
			if !done {
				done = true
				for _, n := range nodes {
					_ = syscall.Kill(n.PID(), syscall.SIGCONT)
				}
			}
		}
		t.Cleanup(resume)
		return resume
	}
	result := outcome("r1", 1, job.ExecutionFailed)

	resume := pause(others)
	if _, err := s.ApplyResult(ctx, "c", "j", result, t0); err != nil {
		t.Fatalf("the other masters' replicas paused, the job's own in sync: %v", err)
	}
	resume()
	pause(mine)
	result.ID = "r2"
	if _, err := s.ApplyResult(ctx, "c", "j", result, t0); !errors.Is(err, store.ErrNotReplicated) {
		t.Fatalf("the job's master's replica paused: %v, want ErrNotReplicated", err)
	}
}

// With AutoReplicas, a write waits for one replica while its master has one in sync, and for
// none while it has none: a master alone takes writes (no outage of writes the operator did
// not ask for), and one with a replica refuses those the replica did not acknowledge.
func TestAutoReplicasWaitWhileAReplicaIsInSync(t *testing.T) {
	ctx := context.Background()
	master := redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	var mu sync.Mutex
	var changes []int // the counts reported, for the planner's log
	s := store.New(master.Client(t), "test", store.WithMinReplicas(store.AutoReplicas, 200*time.Millisecond),
		store.WithReplicaChanges(func(addr string, n int) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, n)
		}))
	firstWrite(t, s)
	putJob(t, s, "c", "j", t0)
	apply := applier(s, "c", "j")
	if err := apply(); err != nil {
		t.Fatalf("a result on a master without replicas: %v", err)
	}

	_, port, _ := net.SplitHostPort(master.Addr)
	replica := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
	testenv.Eventually(t, 10*time.Second, "the replica in sync", func() bool {
		info, err := master.Client(t).Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "state=online")
	})
	// A replica online may still be loading its copy, and acknowledges nothing until it has.
	testenv.Eventually(t, 10*time.Second, "a result with the replica in sync applied", func() bool { return apply() == nil })
	if err := syscall.Kill(replica.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a result the paused replica did not acknowledge refused", func() bool {
		return errors.Is(apply(), store.ErrNotReplicated)
	})

	// The replica gone, its master alone takes writes again once it has looked.
	replica.Kill()
	testenv.Eventually(t, 10*time.Second, "a result on the master left alone applied", func() bool { return apply() == nil })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(changes, []int{1, 0}) {
		t.Errorf("reported %v, want the replica found (1) and lost (0), not the first look (none)", changes)
	}
}

// ReplicasInSync counts each master's replicas by its address, and with AutoReplicas a master
// found without one is reported though nothing was written: the planner's metric and log of a
// master left alone do not wait for a write to it.
func TestReplicasInSyncCountsEachMasterWithoutAWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	ctx := context.Background()
	rc := redistest.StartCluster(t, 3, 1)
	var mu sync.Mutex
	changes := map[string][]int{}
	s := store.New(rc.Client(t), "test", store.WithMinReplicas(store.AutoReplicas, 200*time.Millisecond),
		store.WithReplicaChanges(func(addr string, n int) {
			mu.Lock()
			defer mu.Unlock()
			changes[addr] = append(changes[addr], n)
		}))
	want := map[string]int{}
	var lone *redistest.Server // the replica to kill, of master
	var master string
	for _, n := range rc.Nodes {
		if r := rc.ReplicasOf(n); len(r) == 1 {
			want[n.Addr] = 1
			lone, master = r[0], n.Addr
		}
	}
	if len(want) != 3 {
		t.Fatalf("%d masters with a replica, want 3", len(want))
	}
	var got map[string]int
	var err error
	testenv.Eventually(t, 20*time.Second, "every master's replica counted", func() bool {
		got, err = s.ReplicasInSync(ctx)
		return err == nil && maps.Equal(got, want)
	}, func() string { return fmt.Sprint(got, err) })
	mu.Lock()
	clear(changes) // a replica still in its first sync at the first look was reported found
	mu.Unlock()

	lone.Kill()
	want[master] = 0
	testenv.Eventually(t, 20*time.Second, "the master left alone counted", func() bool {
		got, err = s.ReplicasInSync(ctx)
		return err == nil && maps.Equal(got, want)
	}, func() string { return fmt.Sprint(got, err) })
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 1 || !slices.Equal(changes[master], []int{0}) {
		t.Errorf("reported %v, want only %s losing its replica (0)", changes, master)
	}
}

// A Redis user not allowed INFO cannot have its replicas counted: the error says why, and the
// writes, which count none, do not wait.
func TestReplicasInSyncNotAllowedINFO(t *testing.T) {
	rs := redistest.Start(t, redistest.WithACLUser("resched", "pw-for-info"))
	if err := rs.Client(t).Do(context.Background(), "ACL", "SETUSER", "resched", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	s := store.New(rs.Client(t), "test", store.WithMinReplicas(store.AutoReplicas, 200*time.Millisecond))
	if _, err := s.ReplicasInSync(context.Background()); err == nil || !strings.Contains(err.Error(), "INFO replication") {
		t.Errorf("ReplicasInSync = %v, want the refused INFO named", err)
	}
	firstWrite(t, s)
	putJob(t, s, "c", "j", t0)
	if err := applier(s, "c", "j")(); err != nil {
		t.Errorf("a result written by a user not allowed INFO: %v", err)
	}
}

func TestOnlineReplicasCountsThoseInSync(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n" +
		"slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n" +
		"slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n" +
		"slave2:ip=127.0.0.1,port=7003,state=online,offset=42,lag=1\r\n" +
		"master_failover_state:no-failover\r\nmaster_repl_offset:42\r\n"
	if n := store.OnlineReplicas(info); n != 2 {
		t.Errorf("OnlineReplicas = %d, want 2 (the replica still loading its copy does not acknowledge)", n)
	}
}

// firstWrite puts collection c once the replicas acknowledge writes: a replica reported online
// may still be loading what it was sent, and acknowledges nothing until it has.
func firstWrite(t *testing.T, s *store.Store) {
	t.Helper()
	var err error
	testenv.Eventually(t, 20*time.Second, "a first write acknowledged by the replicas", func() bool {
		_, err = s.PutCollection(context.Background(), "c", []byte(`{}`), job.CollectionEnabled, 0, false)
		return err == nil
	}, func() string { return fmt.Sprint(err) })
}

// outcome is a result of occurrence n of a job due at t0, its id its message too.
func outcome(id string, n int, status job.ExecutionStatus) store.Outcome {
	return store.Outcome{ID: id, Scheduled: t0, Occurrence: n, Entry: job.HistoryEntry{StartTime: t0, EndTime: t0,
		ExpectedExecutionTime: t0, ActionName: job.ActionNameMain, Status: status, Message: id}}
}

// applier returns a function that applies the next result of job c/j (r1, r2, …, each of an
// occurrence of its own) and returns its error.
func applier(s *store.Store, c, j string) func() error {
	n := 0
	return func() error {
		n++
		_, err := s.ApplyResult(context.Background(), c, j, outcome(fmt.Sprint("r", n), n, job.ExecutionCompleted), t0)
		return err
	}
}
