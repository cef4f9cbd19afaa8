package store

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// UnloggedRisk says what Unlogged finds, and what to do, as EvictingRisk does.
const UnloggedRisk = "Redis keeps no append-only file: a crash or restart loses what was written since its last snapshot, " +
	"every job without one: set appendonly yes (docs/operations.md)"

// Unlogged names the Redis masters that keep no append-only file: a crash or restart of one
// loses what was written since its last snapshot, and every job it held if it takes none
// (operations.md asks for AOF). Read from INFO persistence, as Evicting reads its section.
func (s *Store) Unlogged(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	var out []string
	err := s.eachMaster(ctx, func(ctx context.Context, m redis.Cmdable, addr string) error {
		info, err := infoFields(ctx, m, "persistence")
		if err != nil {
			return fmt.Errorf("%s: read whether it keeps an append-only file: %w", cmp.Or(addr, "redis"), err)
		}
		if info["aof_enabled"] == "0" {
			mu.Lock()
			out = append(out, cmp.Or(addr, "redis"))
			mu.Unlock()
		}
		return nil
	})
	return out, err
}
