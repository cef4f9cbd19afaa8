// Command planner is the resched planner: it takes job definitions from the NATS intake
// stream and the NATS API, stores them in Redis, computes each job's next fire time, publishes
// due occurrences to JetStream for the workers, and records the results the workers report.
// Any number of planners may run against one NATS and one Redis.
//
// It reads its configuration from RESCHED_PLANNER_* variables, NATS_URL and REDIS_URL,
// overridden by flags (see -h); logs JSON to stdout; serves /healthz, /readyz and /metrics on
// RESCHED_PLANNER_HTTP_ADDR; and on SIGINT or SIGTERM stops taking work, finishes the batch in
// hand, drains NATS and exits 0 within RESCHED_PLANNER_SHUTDOWN_TIMEOUT.
package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/startup"
	"github.com/resched/resched/services/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status. Logs go to stdout, usage and
// configuration errors to stderr.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return startup.Service[Config]{
		Name:  "planner",
		Parse: func() (Config, error) { return parseConfig(args, getenv, stderr) },
		Level: func(c Config) slog.Level { return c.LogLevel },
		// go-redis logs through one process-wide logger, plain text on stderr unless told
		// otherwise; the process is the right owner of that setting.
		Logger: func(l *slog.Logger) { redis.SetLogger(redisLogger{l}) },
		Serve:  serve,
	}.Run(stdout, stderr)
}

// serve runs the planner until ctx is done, then stops it within cfg.ShutdownTimeout. It
// returns nil after a clean stop.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	logger.Info("planner started", "version", version.String(), "config", cfg)
	if cfg.Reencrypt {
		return reencrypt(ctx, cfg, logger)
	}
	if cfg.Repartition {
		return repartition(ctx, cfg, logger)
	}
	if cfg.keys != nil {
		logger.Info(cfg.keys.Describe())
	}
	for _, w := range cfg.warnings() {
		logger.Warn(w)
	}
	p, err := newPlanner(cfg, logger)
	if err != nil {
		return err
	}
	err = p.run(ctx)
	logger.Info("planner stopped")
	return err
}
