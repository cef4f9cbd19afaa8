package metrics

import (
	"cmp"
	"context"
	"log/slog"
	"time"
)

// ReplicaCounter counts each Redis master's replicas in sync, by address ("" for the one master
// off a Redis Cluster) (store.Store.ReplicasInSync).
type ReplicaCounter func(ctx context.Context) (map[string]int, error)

// SampleReplicas sets redis_replicas_in_sync from count now and then every interval until ctx
// ends, one series per master as last counted: a master gone (failed over, resharded away)
// leaves with the next count. A failed count counts an error of stage "replicas", is logged
// once until a count succeeds again, and leaves the series as they were.
func (p *Planner) SampleReplicas(ctx context.Context, every time.Duration, count ReplicaCounter, logger *slog.Logger) {
	failing := false
	repeat(ctx, every, func() { failing = p.sampleReplicas(ctx, every, count, logger, failing) })
}

// sampleReplicas counts once and says whether the count failed.
func (p *Planner) sampleReplicas(ctx context.Context, timeout time.Duration, count ReplicaCounter, logger *slog.Logger, failing bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	counts, err := count(ctx)
	if err != nil {
		if ctx.Err() == nil || context.Cause(ctx) == context.DeadlineExceeded {
			p.Error("replicas")
			if !failing {
				logger.Warn("count the Redis replicas in sync", "error", err)
			}
		}
		return true
	}
	p.replicas.Reset()
	for master, n := range counts {
		p.replicas.WithLabelValues(cmp.Or(master, "redis")).Set(float64(n))
	}
	return false
}
