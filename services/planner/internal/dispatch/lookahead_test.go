package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/dispatch"
)

// With a lookahead the planner claims a job before it is due and prepares its message, but the
// message reaches the due stream only once the job is due. Real clock: the stream's own
// timestamp of the message is compared with the scheduled time.
func TestLookaheadNeverPublishesEarly(t *testing.T) {
	e := setup(t)
	e.useRealClock()
	due := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	e.put("j", `{"startTime":"`+due.Format(time.RFC3339)+`",`+action+`}`)
	d := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: time.Now, Lookahead: 3 * time.Second})
	if n, err := d.DispatchOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("one round with a 3 s lookahead published %d (%v), want the job due in under 3 s", n, err)
	}
	cons, err := e.js.CreateOrUpdateConsumer(context.Background(), e.subj.DueStream(), jetstream.ConsumerConfig{Durable: "t"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next()
	if err != nil {
		t.Fatal(err)
	}
	meta, err := msg.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	var got bus.Due
	if err := json.Unmarshal(msg.Data(), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Scheduled.Equal(due) || meta.Timestamp.Before(due) {
		t.Fatalf("occurrence scheduled %v reached the stream at %v", got.Scheduled, meta.Timestamp)
	}
}
