package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamOptions are the deployment choices for the streams.
type StreamOptions struct {
	Replicas        int           // 1 for a single server; 3 for a JetStream cluster
	DuplicateWindow time.Duration // how long a re-published due occurrence or result is dropped
}

// EnsureStreams creates or updates the three streams. Every planner and worker calls it at
// start, so whichever starts first creates them.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, s Subjects, o StreamOptions) error {
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 10 * time.Minute
	}
	streams := []jetstream.StreamConfig{
		{
			// Definitions wait here while no planner runs; a planner acknowledges each once stored.
			Name: s.IntakeStream(), Subjects: []string{s.Prefix + ".jobs.>"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: o.Replicas,
			Description: "job definitions published by clients, consumed by the planners",
		},
		{
			Name: s.DueStream(), Subjects: []string{s.Prefix + ".due.>"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: o.Replicas,
			Duplicates:  o.DuplicateWindow,
			Description: "due occurrences published by the planners, consumed by the workers",
		},
		{
			Name: s.ResultsStream(), Subjects: []string{s.Prefix + ".results.>"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: o.Replicas,
			Duplicates:  o.DuplicateWindow,
			Description: "attempt results published by the workers, consumed by the planners",
		},
	}
	for _, cfg := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// IntakeConsumerConfig is the planners' shared consumer of definitions. One definition at a
// time across all planners, so a put and a later delete of a job apply in order.
func IntakeConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: IntakeConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 1, AckWait: 30 * time.Second,
	}
}

// ResultsConsumerConfig is the planners' shared consumer of results.
func ResultsConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: ResultsConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 4096, AckWait: 30 * time.Second,
	}
}

// WorkerConsumerConfig is the workers' shared consumer of due occurrences. ackWait bounds how
// long a worker killed mid-delivery holds an occurrence before another worker gets it.
func WorkerConsumerConfig(ackWait time.Duration, maxAckPending int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: WorkerConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: ackWait, MaxAckPending: maxAckPending, MaxDeliver: -1,
	}
}
