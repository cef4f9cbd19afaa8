// Package pull runs a planner's JetStream pull consumers (the intake and the results): one
// message at a time to a handler, the consumer set up again when it is lost, and the messages
// received but not handled handed back at a stop so another planner gets them at once.
package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Config says which consumer to run and how.
type Config struct {
	Name       string // for logs and errors: "intake", "results"
	JS         jetstream.JetStream
	Stream     string
	Consumer   jetstream.ConsumerConfig
	Prefetch   int           // messages the server may push ahead of the one in hand
	RetryDelay time.Duration // between attempts to set a lost consumer up again
	Logger     *slog.Logger
}

// Run hands messages one by one to handle until ctx ends, then returns nil once the message in
// hand is handled (handle must settle it). It returns an error when the consumer cannot be set
// up at start or the NATS connection is closed; a consumer lost later (deleted, a server
// restart) is set up again every RetryDelay.
func Run(ctx context.Context, cfg Config, handle func(context.Context, jetstream.Msg)) error {
	cons, err := consumer(ctx, cfg)
	if err != nil {
		return err
	}
	for {
		err := consume(ctx, cfg, cons, handle)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, jetstream.ErrConnectionClosed) {
			return fmt.Errorf("%s: %w", cfg.Name, err)
		}
		cfg.Logger.Warn(cfg.Name+": interrupted; resuming", "error", err)
		for cons = nil; cons == nil; {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(cfg.RetryDelay):
			}
			if cons, err = consumer(ctx, cfg); err != nil {
				cfg.Logger.Warn(cfg.Name+" consumer", "error", err)
			}
		}
	}
}

func consumer(ctx context.Context, cfg Config) (jetstream.Consumer, error) {
	cons, err := cfg.JS.CreateOrUpdateConsumer(ctx, cfg.Stream, cfg.Consumer)
	if err != nil {
		return nil, fmt.Errorf("%s consumer on stream %s: %w", cfg.Name, cfg.Stream, err)
	}
	return cons, nil
}

// consume handles messages one by one until ctx ends or the iterator fails.
func consume(ctx context.Context, cfg Config, cons jetstream.Consumer, handle func(context.Context, jetstream.Msg)) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(max(cfg.Prefetch, 1)))
	if err != nil {
		return fmt.Errorf("%s messages: %w", cfg.Name, err)
	}
	defer release(cfg, it)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return err
		}
		handle(ctx, msg)
	}
}

// release stops the iterator and hands back what it had already received, so another planner
// gets it now rather than after the consumer's AckWait.
func release(cfg Config, it jetstream.MessagesContext) {
	it.Drain()
	for {
		msg, err := it.Next(jetstream.NextMaxWait(time.Second))
		if err != nil {
			return
		}
		if err := msg.Nak(); err != nil {
			cfg.Logger.Warn(cfg.Name+": hand back message", "subject", msg.Subject(), "error", err)
		}
	}
}
