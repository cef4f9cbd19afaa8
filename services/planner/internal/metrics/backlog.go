package metrics

import (
	"context"
	"log/slog"
	"time"
)

// BacklogCounter counts the due jobs nobody has claimed yet (store.Store.DueBacklog).
type BacklogCounter func(ctx context.Context, now time.Time) (int64, error)

// SampleDueBacklog sets the backlog gauge from count now and then every interval until ctx
// ends. It samples on a timer rather than at scrape time so that a slow Redis never holds a
// scrape up; a failed sample counts an error of stage "backlog" and leaves the gauge as it was.
func (p *Planner) SampleDueBacklog(ctx context.Context, every time.Duration, count BacklogCounter, logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	repeat(ctx, every, func() { p.sample(ctx, every, count, logger) })
}

// repeat calls f now and then every interval until ctx ends: the samplers run on a timer
// rather than at scrape time, so that a slow Redis never holds a scrape up.
func repeat(ctx context.Context, every time.Duration, f func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Planner) sample(ctx context.Context, timeout time.Duration, count BacklogCounter, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n, err := count(ctx, time.Now())
	if err != nil {
		if ctx.Err() == nil || context.Cause(ctx) == context.DeadlineExceeded {
			p.Error("backlog")
			logger.Warn("sample due backlog", "error", err)
		}
		return
	}
	p.SetDueBacklog(n)
}
