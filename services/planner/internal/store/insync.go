package store

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// AutoReplicas, given to WithMinReplicas, makes each write wait for one replica of its master
// while that master has one in sync, and for none while it has none.
const AutoReplicas = -1

// inSyncLook is how long a master's count of replicas in sync is used before it is looked at
// again.
const inSyncLook = time.Second

// inSync counts each master's replicas in sync (INFO replication), for AutoReplicas. A master
// is looked at once a second at most, by the write that finds its count stale; the writes
// meanwhile use the count it had.
type inSync struct {
	mu    sync.Mutex
	looks map[string]*replicaLook // by master address ("" off a Redis Cluster)
	// changed, when set, is told when a master's count goes from some to none or back, after
	// its first look: its writes stop or start waiting (WithReplicaChanges).
	changed func(master string, inSync int)
}

type replicaLook struct {
	n       int
	at      time.Time // when looked at last, answered or not
	known   bool      // a look has answered: n is the master's, not a guess
	looking bool
}

// look is addr's entry; c.mu is held.
func (c *inSync) look(addr string) *replicaLook {
	if c.looks == nil {
		c.looks = map[string]*replicaLook{}
	}
	l, ok := c.looks[addr]
	if !ok {
		l = &replicaLook{}
		c.looks[addr] = l
	}
	return l
}

// count is how many replicas of master (at addr) are in sync, as last seen. A master that
// cannot be asked (a Redis user not allowed INFO) counts none: its writes wait for no replica.
func (c *inSync) count(ctx context.Context, master redis.Cmdable, addr string) int {
	c.mu.Lock()
	l := c.look(addr)
	// Until a first look has answered, every write looks: none goes unwaited on a guess.
	if !l.at.IsZero() && (l.looking || time.Since(l.at) < inSyncLook) {
		n := l.n
		c.mu.Unlock()
		return n
	}
	l.looking = true
	c.mu.Unlock()

	n, err := replicasOf(ctx, master)
	c.mu.Lock()
	defer c.mu.Unlock()
	l.looking = false
	if err != nil {
		l.at = time.Now()
		return l.n
	}
	c.seenLocked(l, addr, n)
	return l.n
}

// seen records a count looked at elsewhere (Store.ReplicasInSync), so that the writes go by it
// and a change is reported even while nothing is written.
func (c *inSync) seen(addr string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seenLocked(c.look(addr), addr, n)
}

func (c *inSync) seenLocked(l *replicaLook, addr string, n int) {
	was, known := l.n, l.known
	l.n, l.at, l.known = n, time.Now(), true
	if known && (was == 0) != (n == 0) && c.changed != nil {
		c.changed(addr, n)
	}
}

// onlineReplicas counts the replicas INFO replication lists as online: connected and past
// their first synchronisation, so that they acknowledge what they are sent.
func onlineReplicas(info string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ":") && strings.Contains(line, "state=online") {
			n++
		}
	}
	return n
}

// ReplicasInSync looks at every Redis master now and counts its replicas in sync, by address
// ("" off a Redis Cluster). With AutoReplicas, the writes go by these counts until their next
// look, and a master found without a replica is reported (WithReplicaChanges) even while
// nothing is written to it.
func (s *Store) ReplicasInSync(ctx context.Context) (map[string]int, error) {
	var mu sync.Mutex
	out := map[string]int{}
	err := s.eachMaster(ctx, func(ctx context.Context, m redis.Cmdable, addr string) error {
		n, err := replicasOf(ctx, m)
		if err != nil {
			return fmt.Errorf("master %s: %w", cmp.Or(addr, "redis"), err)
		}
		if s.minReplicas == AutoReplicas {
			s.inSync.seen(addr, n)
		}
		mu.Lock()
		out[addr] = n
		mu.Unlock()
		return nil
	})
	return out, err
}

// replicasOf asks master how many of its replicas are in sync.
func replicasOf(ctx context.Context, master redis.Cmdable) (int, error) {
	info, err := master.Info(ctx, "replication").Result()
	if err != nil {
		return 0, fmt.Errorf("count its replicas (INFO replication): %w", err)
	}
	return onlineReplicas(info), nil
}
