package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// oomScripts keep the schedule running while Redis is at its maxmemory: the heartbeat, the
// taking of leases and the dispatcher's advance. Redis then refuses every write that could
// grow its memory, so the planners fired nothing until memory was freed, every collection's
// jobs stopped by one that filled Redis with jobs. These write a bounded amount: the heartbeat
// and a lease fixed-size keys, an advance a job's fields in place and at most its capped
// history's Skipped entries. Puts and the results' history, which grow, are still refused.
var oomScripts = []string{"heartbeat", "acquire", "advance"}

// oomFlag is the shebang line that gives a script Redis's allow-oom flag.
const oomFlag = "#!lua flags=allow-oom\n"

// UseScriptFlags gives the scripts of oomScripts Redis's allow-oom flag when every master runs
// Redis 7 or later: script flags came with 7.0, and an older server refuses a script that
// declares them. It reports whether they have it; without, dispatch stops while Redis is full.
// Call it before the store is used by several goroutines.
func (s *Store) UseScriptFlags(ctx context.Context) (bool, error) {
	var older atomic.Bool
	err := s.eachMaster(ctx, func(ctx context.Context, m redis.Cmdable, addr string) error {
		info, err := m.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("read the Redis version: %w", err)
		}
		if major, ok := majorVersion(info); !ok || major < 7 {
			older.Store(true)
		}
		return nil
	})
	if err != nil || older.Load() {
		return false, err
	}
	for _, name := range oomScripts {
		src, _ := luaFS.ReadFile("lua/" + name + ".lua")
		s.scripts[name] = redis.NewScript(oomFlag + string(src))
	}
	s.oomFlags = true
	return true, nil
}

// majorVersion reads redis_version from INFO server.
func majorVersion(info string) (int, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			n, err := strconv.Atoi(major)
			return n, err == nil
		}
	}
	return 0, false
}
