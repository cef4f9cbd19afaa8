// Package store keeps the planner's state in Redis: collections, job definitions, each job's
// schedule state and status, the due sorted set and the history. The planner owns Redis; no
// other service reads or writes it. Every change that touches more than one key is one Lua
// script (lua/*.lua) with every key in KEYS, all of one hash-tagged partition.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// Errors of the store. QuotaError is returned as a value.
var (
	ErrNotFound     = errors.New("not found")
	ErrNoCollection = errors.New("job collection not found")
	// ErrCollectionChanged: the collection is not at the generation a put was checked against.
	ErrCollectionChanged = errors.New("job collection changed")
	ErrConflict          = errors.New("changed concurrently")
	// ErrDeleting: the collection's delete is under way (Changes); it takes no puts.
	ErrDeleting = errors.New("job collection being deleted")
	ErrExists   = errors.New("already exists")
	// ErrNotOwner: the partition's lease is not (or no longer) this planner's.
	ErrNotOwner = errors.New("partition lease not held")
	// ErrNotReplicated: a write was made, but fewer replicas than WithMinReplicas asks for
	// acknowledged it in time; the caller treats it as not made (a retry is harmless).
	ErrNotReplicated = errors.New("not acknowledged by enough Redis replicas")
)

// Moving reports whether err is a Redis Cluster slot moving between masters (MOVED, ASK,
// TRYAGAIN), as in a reshard or just after a failover: the write was not made, and made again
// once the client follows the slot, it goes through. Not a fault to count against Redis.
func Moving(err error) bool {
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsTryAgainError(err)
}

// Unavailable reports whether err says Redis could not answer now: not reached (refused, reset,
// its connections all busy past their wait), too slow for the call's deadline, loading its data
// after a restart, or without a master for the keys (a failover under way). A request met by it
// may work sent again, unlike a fault of the planner's own.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || redis.IsLoadingError(err) || redis.IsReadOnlyError(err) ||
		redis.IsClusterDownError(err) || redis.IsMasterDownError(err) || redis.IsMaxClientsError(err) || Moving(err)
}

// QuotaError says a collection is full.
type QuotaError struct{ Max int }

func (e QuotaError) Error() string {
	return fmt.Sprintf("the job collection has reached its quota of %d jobs", e.Max)
}

// Store is the Redis store. It is safe for concurrent use.
type Store struct {
	rdb          redis.UniversalClient
	k            keys
	scripts      map[string]*redis.Script
	oomFlags     bool // UseScriptFlags gave the schedule's scripts allow-oom
	resultMemory time.Duration
	// history retention (WithHistory)
	historyMax     int
	historyAge     time.Duration
	historyMessage int
	// minReplicas and replicaWait: WithMinReplicas; inSync counts the replicas for AutoReplicas.
	minReplicas int
	replicaWait time.Duration
	inSync      inSync
}

// Option changes a Store.
type Option func(*Store)

// WithPartitions spreads the data over n partitions (DefaultPartitions when not given).
func WithPartitions(n int) Option {
	return func(s *Store) { s.k = newKeys(s.k.prefix, min(max(n, 1), MaxPartitions)) }
}

// WithResultMemory sets how long the ids of applied results are remembered (ResultMemory).
func WithResultMemory(d time.Duration) Option {
	return func(s *Store) { s.resultMemory = max(d, time.Minute) }
}

// WithMinReplicas makes every write of jobs, collections and results wait until n replicas of
// the Redis master have it (WAIT), at most wait, and fail with ErrNotReplicated otherwise.
// Redis replicates asynchronously: a failover can lose the last writes the old master
// acknowledged, and a result the planner acknowledged in JetStream would then be missing from
// history for good. With n ≥ 1 such a write is not acknowledged, and is made again. With n
// AutoReplicas a write waits for one replica while its master has one in sync, and for none
// while it has none: a master left alone goes on taking writes, as with 0.
func WithMinReplicas(n int, wait time.Duration) Option {
	return func(s *Store) { s.minReplicas, s.replicaWait = max(n, AutoReplicas), max(wait, time.Millisecond) }
}

// WithReplicaChanges has changed told when, with AutoReplicas, a master (its address; "" off a
// Redis Cluster) is found with no replica in sync after it had one (inSync 0: its writes no
// longer wait, and a failover now could lose them), or with one again. A master that never had
// one (a single server) is not reported.
func WithReplicaChanges(changed func(master string, inSync int)) Option {
	return func(s *Store) { s.inSync.changed = changed }
}

// New returns a store whose keys start with prefix ("resched" when empty).
func New(rdb redis.UniversalClient, prefix string, opts ...Option) *Store {
	if prefix == "" {
		prefix = "resched"
	}
	s := &Store{rdb: rdb, k: newKeys(prefix, DefaultPartitions), scripts: map[string]*redis.Script{}, resultMemory: ResultMemory,
		historyMax: HistoryMaxEntries, historyAge: HistoryMaxAge, historyMessage: HistoryMaxMessage}
	for _, o := range opts {
		o(s)
	}
	entries, _ := luaFS.ReadDir("lua")
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".lua")
		s.loadScript(name, name, "")
	}
	return s
}

// loadScript makes the script name of lua/<file>.lua, its source after head (a flags line, or
// "").
func (s *Store) loadScript(name, file, head string) {
	src, _ := luaFS.ReadFile("lua/" + file + ".lua")
	s.scripts[name] = redis.NewScript(head + string(src))
}

// Partitions is the number of partitions.
func (s *Store) Partitions() int { return len(s.k.tags) }

// PartitionOf returns the partition that holds a collection and its jobs.
func (s *Store) PartitionOf(collection string) int { return s.k.partitionOf(collection) }

func (s *Store) run(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.scripts[script].Run(ctx, s.rdb, keys, args...)
}

// runReplicated is run for a write that must outlive a failover: it waits for the replicas
// WithMinReplicas asks for.
func (s *Store) runReplicated(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.evalAll(ctx, script, 1, func(int) ([]string, []any) { return keys, args })[0]
}

// Ping checks that Redis answers, for readiness: every master of a Redis Cluster, since the
// partitions are spread over all of them.
func (s *Store) Ping(ctx context.Context) error {
	return s.eachMaster(ctx, func(ctx context.Context, m redis.Cmdable, addr string) error {
		err := m.Ping(ctx).Err()
		if err != nil && addr != "" {
			err = fmt.Errorf("master %s: %w", addr, err)
		}
		return err
	})
}

// eachMaster calls f for every master of a Redis Cluster (concurrently, with its address), or
// once for the one master otherwise (with the address "").
func (s *Store) eachMaster(ctx context.Context, f func(ctx context.Context, m redis.Cmdable, addr string) error) error {
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return f(ctx, m, m.Options().Addr) })
	}
	return f(ctx, s.rdb, "")
}

func ms(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// parseMS and atoi read fields that are often empty (a job not yet run); an empty one is
// zero without the error value strconv would allocate, once per field per fire.
func parseMS(v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func atoi(v string) int {
	if v == "" {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// OutOfMemory reports whether Redis refused a command for its maxmemory (with the
// noeviction policy resched needs): writes are refused until memory is freed, and so is every
// command queued in a transaction, reads too.
func OutOfMemory(err error) bool {
	return err != nil && strings.Contains(err.Error(), "OOM command not allowed")
}

// scriptError maps the error replies of the scripts to the store's errors.
func scriptError(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "ERR ") // Redis 7 prefixes error replies without a code
	switch {
	case msg == "NOCOLLECTION":
		return ErrNoCollection
	case msg == "COLLCHANGED":
		return ErrCollectionChanged
	case msg == "NOTOWNER":
		return ErrNotOwner
	case msg == "EXISTS":
		return ErrExists
	case msg == "DELETING":
		return ErrDeleting
	case msg == "CONFLICT" || msg == "RETRY":
		return ErrConflict
	case strings.HasPrefix(msg, "QUOTA "):
		return QuotaError{Max: atoi(strings.TrimPrefix(msg, "QUOTA "))}
	}
	return err
}
