package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/resched/resched/services/planner/internal/store"
)

// repartition is the planner run with -repartition: it moves the data Redis holds to the
// partition count this planner is set to, and exits. Every planner must be stopped; it checks
// that none runs, and planners refuse to start until the move has ended. Stopped half way, it
// is run again to finish.
func repartition(ctx context.Context, cfg Config, logger *slog.Logger) error {
	rdb, err := cfg.Redis.Client("resched-planner-repartition", logger)
	if err != nil {
		return err
	}
	defer rdb.Close()
	st := store.New(rdb, cfg.RedisKeyPrefix, store.WithPartitions(cfg.Partitions))
	moved := 0
	r, err := st.Repartition(ctx, func(string) {
		if moved++; moved%1000 == 0 {
			logger.Info("repartition: collections moved so far", "moved", moved)
		}
	})
	logger.Info("repartitioned", "from", r.From, "to", r.To, "collections", r.Collections, "moved", r.Moved, "jobs_moved", r.Jobs)
	if err != nil {
		return fmt.Errorf("repartition: %w", err)
	}
	return nil
}
