package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
)

// The overview's backlog is the workers' consumer's, asked of JetStream in the streams'
// domain: a gateway connected to a leaf node whose own JetStream has no such consumer reads
// the hub's (NATS_JS_DOMAIN), and says nothing rather than 0 where there is none.
func TestBacklogIsAskedInTheStreamsDomain(t *testing.T) {
	ctx := context.Background()
	hub := natstest.Start(t, natstest.WithLeafNodes(t, "hub"))
	leaf := natstest.LeafOf(t, hub, "edge")
	_, js, subjects := hub.JetStream(t)
	if _, err := js.CreateOrUpdateConsumer(ctx, subjects.DueStream(), bus.WorkerConsumerConfig(time.Minute, 100)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, subjects.Due("c", "j"), nil); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := nats.Connect(leaf.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	backlog := func(api string) (map[string]uint64, bool) {
		t.Helper()
		d, err := New(Config{NATS: nc, Subjects: subjects, JetStreamAPI: api, Auth: &switchAuth{}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		return d.backlog(ctx)
	}
	if got, ok := backlog("$JS.hub.API"); !ok || got["waiting"] != 3 {
		t.Errorf("in the hub's domain: %v %v, want 3 waiting", got, ok)
	}
	if got, ok := backlog(""); ok {
		t.Errorf("in the leaf's own JetStream, which has no workers' consumer: %v, want nothing said", got)
	}
}
