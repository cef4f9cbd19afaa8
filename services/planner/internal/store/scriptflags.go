package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// oomScripts keep the schedule running while Redis is at its maxmemory: the heartbeat, the
// taking of leases and the dispatcher's advance. Redis then refuses every write that could
// grow its memory, so the planners fired nothing until memory was freed, every collection's
// jobs stopped by one that filled Redis with jobs. These write a bounded amount: the heartbeat
// and a lease fixed-size keys, an advance a job's fields in place and at most its capped
// history's Skipped entries. Puts and the results' history, which grow, are still refused.
// A collection's state change is one too, so that an operator can stop a collection's jobs
// (the team that filled Redis, say) and start them again: the state is written in place, and
// its jobs leave the due set and come back to it; and so is taking up one that a planner left
// unfinished, or a deleted job's purge (a score written in place).
var oomScripts = []string{"heartbeat", "acquire", "advance", "set_collection_state", "take_change", "take_purge"}

// putInPlace is put_jobs.lua with the allow-oom flag, for the puts that only enable or disable
// a job (PutJob.InPlace): a job's state and its definition rewritten at the same size, and its
// entry in the due set removed or put back.
const putInPlace = "put_in_place"

// oomFlag is the shebang line that gives a script Redis's allow-oom flag.
const oomFlag = "#!lua flags=allow-oom\n"

// UseScriptFlags gives the scripts of oomScripts Redis's allow-oom flag when every master takes
// script flags: they came with Redis 7.0, and an older server refuses a script that declares
// them. Each master is asked with a script of its own that declares the flag, rather than by
// its version: a Redis user need not be allowed INFO, and a server that speaks Redis's protocol
// under another version number answers for itself. It reports whether the scripts have the
// flag; without, dispatch stops while Redis is full. Call it before the store is used by several
// goroutines.
func (s *Store) UseScriptFlags(ctx context.Context) (bool, error) {
	var refused atomic.Bool
	err := s.eachMaster(ctx, func(ctx context.Context, m redis.Cmdable, addr string) error {
		err := m.Eval(ctx, oomFlag+"return 1", nil).Err()
		var reply redis.Error
		switch {
		case err == nil:
		case errors.As(err, &reply): // the server answered: it does not take the flag
			refused.Store(true)
		default:
			return fmt.Errorf("ask Redis whether it takes script flags: %w", err)
		}
		return nil
	})
	if err != nil || refused.Load() {
		return false, err
	}
	for _, name := range oomScripts {
		s.loadScript(name, name, oomFlag)
	}
	s.loadScript(putInPlace, "put_jobs", oomFlag)
	s.oomFlags = true
	return true, nil
}
