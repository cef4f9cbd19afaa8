package security

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
)

// A worker at an edge site, connected to a leaf node that runs a JetStream of its own, takes
// the occurrences from the central hub's streams through their JetStream domain
// (NATS_JS_DOMAIN), where the planner, connected to the hub, publishes them. Without the
// domain the worker made streams of its own in the leaf's JetStream: the planner's publishes
// reached both (the leaf's streams listen on the same subjects), the worker delivered from
// the leaf's copy, and the hub's due stream was never drained.
func TestAWorkerOnALeafNodeTakesTheHubsOccurrences(t *testing.T) {
	hub := natstest.Start(t, natstest.WithLeafNodes(t, "hub"))
	leaf := natstest.LeafOf(t, hub, "edge")
	sc := &scheduler{dir: t.TempDir(), setup: setup{natsURL: hub.ClientURL(), redis: []string{"REDIS_URL=" + redistest.Start(t).URL()}},
		target: startTarget(t)}
	sc.planner = sc.startPlanner(t, "planner")
	sc.worker = start(t, sc.dir, "worker", "worker", "NATS_URL="+leaf.ClientURL(), "NATS_JS_DOMAIN=hub")
	sc.planner.waitReady(t)
	sc.worker.waitReady(t)
	sc.deliver(t, "c", "edge", "pw-edge")

	ctx := context.Background()
	_, central, _ := hub.JetStream(t)
	consumer, err := central.Consumer(ctx, "SCHEDULER_DUE", "workers")
	if err != nil {
		t.Fatalf("the workers' consumer on the hub: %v", err)
	}
	if info, err := consumer.Info(ctx); err != nil || info.Delivered.Consumer == 0 {
		t.Errorf("the hub's due stream delivered nothing to the workers (%v)", err)
	}
	nc, err := nats.Connect(leaf.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	edge, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := edge.Stream(ctx, "SCHEDULER_DUE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("the leaf's own JetStream: %v, want no due stream there", err)
	}
}
