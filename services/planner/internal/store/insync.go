package store

import (
	"bufio"
	"context"
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
	at      time.Time
	looking bool
}

// count is how many replicas of master (at addr) are in sync, as last seen. A master that
// cannot be asked (a Redis user not allowed INFO) counts none: its writes wait for no replica.
func (c *inSync) count(ctx context.Context, master redis.Cmdable, addr string) int {
	c.mu.Lock()
	if c.looks == nil {
		c.looks = map[string]*replicaLook{}
	}
	l, ok := c.looks[addr]
	if !ok {
		l = &replicaLook{}
		c.looks[addr] = l
	}
	// Until a first look has answered, every write looks: none goes unwaited on a guess.
	if !l.at.IsZero() && (l.looking || time.Since(l.at) < inSyncLook) {
		n := l.n
		c.mu.Unlock()
		return n
	}
	l.looking = true
	c.mu.Unlock()

	info, err := master.Info(ctx, "replication").Result()
	c.mu.Lock()
	defer c.mu.Unlock()
	first := l.at.IsZero()
	l.looking, l.at = false, time.Now()
	if err == nil {
		was := l.n
		l.n = onlineReplicas(info)
		if !first && (was == 0) != (l.n == 0) && c.changed != nil {
			c.changed(addr, l.n)
		}
	}
	return l.n
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
