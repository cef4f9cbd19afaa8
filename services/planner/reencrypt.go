package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/jobschema"
)

// reencrypt is the planner run with -reencrypt: it re-seals every stored job's secrets with
// the newest key and exits. It needs Redis only, and may run beside serving planners: each
// job is rewritten with a compare-and-set that keeps its schedule.
func reencrypt(ctx context.Context, cfg Config, logger *slog.Logger) error {
	rdb, err := cfg.Redis.Client("resched-planner-reencrypt", logger)
	if err != nil {
		return err
	}
	defer rdb.Close()
	st := store.New(rdb, cfg.RedisKeyPrefix, store.WithPartitions(cfg.Partitions))
	if err := st.CheckLayout(ctx); err != nil {
		return err
	}
	validator, err := jobschema.New()
	if err != nil {
		return err
	}
	n, err := jobs.New(jobs.Config{Store: st, Validator: validator, Keys: cfg.keys, Logger: logger}).Reseal(ctx)
	logger.Info("re-encrypted job secrets", "key", cfg.keys.Newest(), "jobs", n.Jobs, "resealed", n.Resealed)
	if err != nil {
		return fmt.Errorf("re-encrypt: %w", err)
	}
	return nil
}
