package store

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// evalAll runs one script n times in one pipeline (one round trip per Redis node), call i with
// the keys and arguments args(i) gives, in order; each command carries its own outcome.
func (s *Store) evalAll(ctx context.Context, script string, n int, args func(i int) ([]string, []any)) []*redis.Cmd {
	return s.evalMixed(ctx, n, func(i int) (string, []string, []any) {
		keys, a := args(i)
		return script, keys, a
	})
}

// evalMixed is evalAll with a script per call. Calls go as EVALSHA; those a Redis does not know
// the script of (restarted, a new master) are sent again once the scripts are loaded. Its calls
// are writes that must outlive a failover: they wait for the replicas WithMinReplicas asks for.
func (s *Store) evalMixed(ctx context.Context, n int, call func(i int) (string, []string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	todo := make([]int, n)
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; len(todo) > 0 && attempt < 2; attempt++ {
		calls := make([]evalCall, len(todo))
		for k, i := range todo {
			c := &calls[k]
			c.script, c.keys, c.args = call(i)
		}
		s.pipelined(ctx, len(todo), true, func(k int) string { return calls[k].keys[0] }, func(pipe redis.Pipeliner, k int) {
			c := &calls[k]
			cmds[todo[k]] = s.scripts[c.script].EvalSha(ctx, pipe, c.keys, c.args...)
		})
		var again []int
		for _, i := range todo {
			if err := cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
				again = append(again, i)
			}
		}
		if len(again) > 0 {
			if err := s.loadScripts(ctx); err != nil {
				for _, i := range again {
					cmds[i].SetErr(err)
				}
				break
			}
		}
		todo = again
	}
	return cmds
}

// evalCall is one script call: the keys (all of one slot) and the arguments.
type evalCall struct {
	script string
	keys   []string
	args   []any
}

// partitionCalls splits n items into script calls, since a call may only name the keys of one
// Redis Cluster slot: the indexes of each call's items, all of one partition, in their order,
// chunk at most. item(i) is the collection of item i, and whether it needs a call of its own;
// such a call closes its partition's open call, so that the partition's items after it go in a
// later call, after it.
func (s *Store) partitionCalls(n, chunk int, item func(i int) (collection string, alone bool)) [][]int {
	var calls [][]int
	open := map[int]int{} // partition -> its call being filled
	for i := range n {
		c, alone := item(i)
		p := s.k.partitionOf(c)
		if alone {
			delete(open, p)
			calls = append(calls, []int{i})
			continue
		}
		k, ok := open[p]
		if !ok || len(calls[k]) == chunk {
			k = len(calls)
			calls = append(calls, make([]int, 0, min(chunk, n-i)))
			open[p] = k
		}
		calls[k] = append(calls[k], i)
	}
	return calls
}

// pipelined sends n commands, command i to key(i), in one pipeline per Redis Cluster master,
// side by side (one pipeline on a single server or Sentinel). add(pipe, i) queues command i.
// A cluster pipeline that cannot reach a node sets its context error on every command once its
// retries run out, those the healthy masters had answered too: one lost master then failed
// the leases of every partition, and each planner stopped dispatching all of them. replicated
// says the commands are writes that wait for the replicas WithMinReplicas asks for.
func (s *Store) pipelined(ctx context.Context, n int, replicated bool, key func(i int) string, add func(pipe redis.Pipeliner, i int)) {
	if n == 0 {
		return
	}
	groups := [][]int{make([]int, n)}
	cc, _ := s.rdb.(*redis.ClusterClient) // nil off a cluster
	if cc != nil {
		groups = byMaster(ctx, cc, n, key)
	} else {
		for i := range groups[0] {
			groups[0][i] = i
		}
	}
	send := func(g []int) {
		if replicated && s.minReplicas != 0 {
			master, want, err := s.replicasFor(ctx, cc, key(g[0]))
			if err != nil {
				failAll(s.rdb.Pipeline(), g, add, err)
				return
			}
			if want > 0 {
				if s.sendReplicated(ctx, master, want, g, add) && cc != nil {
					cc.ReloadState(ctx) // the slot map is stale: the retry goes to the new master
				}
				return
			}
		}
		pipe := s.rdb.Pipeline()
		for _, i := range g {
			add(pipe, i)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own outcome
	}
	if len(groups) == 1 {
		send(groups[0])
		return
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Go(func() { send(g) })
	}
	wg.Wait()
}

// replicasFor is the master that serves key (s.rdb off a Redis Cluster, cc; nil otherwise)
// and how many of its replicas a write there waits for: WithMinReplicas's number, or with
// AutoReplicas one while the master has one in sync.
func (s *Store) replicasFor(ctx context.Context, cc *redis.ClusterClient, key string) (redis.Cmdable, int, error) {
	var master redis.Cmdable = s.rdb
	addr := ""
	if cc != nil {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: no master for %s: %v", ErrNotReplicated, key, err)
		}
		master, addr = m, m.Options().Addr
	}
	if s.minReplicas != AutoReplicas {
		return master, s.minReplicas, nil
	}
	return master, min(s.inSync.count(ctx, master, addr), 1), nil
}

// sendReplicated sends the commands of group g to master, then WAIT for want replicas, in one
// pipeline: WAIT counts the writes of its own connection. It names no key, so on a Redis
// Cluster, where a cluster pipeline would send it to any node, the group goes through the
// client of the master that serves it, which does not follow a slot moved (MOVED, ASK: the
// command fails, Moving, and is made again); it reports whether one was. When fewer replicas
// acknowledge the writes in time, each command of g that succeeded fails with ErrNotReplicated.
func (s *Store) sendReplicated(ctx context.Context, master redis.Cmdable, want int, g []int, add func(pipe redis.Pipeliner, i int)) (moved bool) {
	pipe := master.Pipeline()
	for _, i := range g {
		add(pipe, i)
	}
	acked := pipe.Do(ctx, "WAIT", want, s.replicaWait.Milliseconds())
	cmds, _ := pipe.Exec(ctx) // each command carries its own outcome
	for _, c := range cmds {
		if _, ok := redis.IsMovedError(c.Err()); ok {
			moved = true
		}
	}
	n, err := acked.Int64()
	if err == nil && n >= int64(want) {
		return moved
	}
	reason := fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, n, want, s.replicaWait)
	if err != nil {
		reason = fmt.Errorf("%w: %v", ErrNotReplicated, err)
	}
	for _, c := range cmds[:len(cmds)-1] {
		if c.Err() == nil {
			c.SetErr(reason)
		}
	}
	return moved
}

// failAll queues the commands of g on pipe, which is not sent, and sets err on each.
func failAll(pipe redis.Pipeliner, g []int, add func(pipe redis.Pipeliner, i int), err error) {
	for _, i := range g {
		add(pipe, i)
	}
	for _, c := range pipe.Cmds() {
		c.SetErr(err)
	}
	pipe.Discard()
}

// byMaster groups the commands by the master that serves their key, as the client's slot map
// has it; those it cannot place go together.
func byMaster(ctx context.Context, cc *redis.ClusterClient, n int, key func(i int) string) [][]int {
	at := map[string]int{}
	var groups [][]int
	for i := range n {
		addr := ""
		if m, err := cc.MasterForKey(ctx, key(i)); err == nil {
			addr = m.Options().Addr
		}
		g, ok := at[addr]
		if !ok {
			g = len(groups)
			at[addr] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// loadScripts loads every script into Redis (every master of a cluster).
func (s *Store) loadScripts(ctx context.Context) error {
	for name, sc := range s.scripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("load script %s: %w", name, err)
		}
	}
	return nil
}
