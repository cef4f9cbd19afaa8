package store

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// EvictingRisk says what Evicting finds, and what to do: the planner's start logs it, and
// `schedctl cluster status` shows it, in these words.
const EvictingRisk = "Redis may evict keys to make room, and an evicted key is a job, collection or history lost: " +
	"set maxmemory-policy noeviction (docs/operations.md)"

// Evicting names the Redis masters that may evict keys to make room: a maxmemory set and a
// maxmemory-policy other than noeviction. The keys are the jobs, their collections and their
// history, so an evicted key is one of them lost without a trace. Read from INFO memory, which
// managed services that turn CONFIG off still answer. Each name is "address: policy".
func (s *Store) Evicting(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	var out []string
	err := s.eachMaster(ctx, func(ctx context.Context, m redis.Cmdable, addr string) error {
		policy, err := evictionPolicy(ctx, m)
		if err != nil && addr != "" {
			return fmt.Errorf("master %s: %w", addr, err)
		}
		if err != nil || policy == "" {
			return err
		}
		mu.Lock()
		out = append(out, cmp.Or(addr, "redis")+": "+policy)
		mu.Unlock()
		return nil
	})
	return out, err
}

// evictionPolicy is the server's maxmemory-policy when it may evict keys, else "".
func evictionPolicy(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := infoFields(ctx, c, "memory")
	if err != nil {
		return "", fmt.Errorf("read the eviction policy: %w", err)
	}
	limit, policy := info["maxmemory"], info["maxmemory_policy"]
	if limit == "0" || policy == "" || policy == "noeviction" {
		return "", nil
	}
	return policy, nil
}

// infoFields reads one section of INFO as its fields.
func infoFields(ctx context.Context, c redis.Cmdable, section string) (map[string]string, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s: %w", section, err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}
