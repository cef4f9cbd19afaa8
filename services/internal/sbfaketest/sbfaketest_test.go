package sbfaketest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/resched/resched/services/internal/sbfaketest"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func send(t *testing.T, c *azservicebus.Client, entity string, m *azservicebus.Message) error {
	t.Helper()
	s, err := c.NewSender(entity, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	return s.SendMessage(ctx(t), m, nil)
}

func receive(t *testing.T, r *azservicebus.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	got, err := r.ReceiveMessages(ctx(t), 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %d messages, err %v", len(got), err)
	}
	return got[0]
}

// TestQueuePeekLock sends typed properties through a queue and reads them back in peek-lock
// mode: an abandoned message comes back with its delivery count raised, a completed one is gone.
func TestQueuePeekLock(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	c := b.Client(t)
	err := send(t, c, "jobs", &azservicebus.Message{Body: []byte("hello"), MessageID: new("m-1"),
		ApplicationProperties: map[string]any{"s": "x", "n": int64(7), "f": true}})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	r, err := c.NewReceiverForQueue("jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, r)
	if string(m.Body) != "hello" || m.MessageID != "m-1" || m.ApplicationProperties["n"] != int64(7) ||
		m.ApplicationProperties["s"] != "x" || m.ApplicationProperties["f"] != true || m.SequenceNumber == nil {
		t.Fatalf("received %+v", m)
	}
	if err := r.AbandonMessage(ctx(t), m, nil); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	m = receive(t, r)
	if m.DeliveryCount != 2 {
		t.Errorf("delivery count after abandon = %d, want 2", m.DeliveryCount)
	}
	if err := r.CompleteMessage(ctx(t), m, nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if j := b.Messages(t); len(j) != 1 || j[0].ApplicationProperties["n"] != "SmallLong:7" {
		t.Errorf("journal = %+v, want one message with n as SmallLong:7", j)
	}
}

// TestTopicFanOut delivers one message to every subscription (receive-and-delete).
func TestTopicFanOut(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithTopic("events", "audit"))
	b.CreateSubscription(t, "events", "billing")
	c := b.Client(t)
	if err := send(t, c, "events", &azservicebus.Message{Body: []byte("fan")}); err != nil {
		t.Fatalf("send: %v", err)
	}
	for _, sub := range []string{"audit", "billing"} {
		r, err := c.NewReceiverForSubscription("events", sub, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		if m := receive(t, r); string(m.Body) != "fan" {
			t.Errorf("%s received %q", sub, m.Body)
		}
	}
}

// TestRefusals: a wrong key fails the CBS handshake; an unknown entity is not found.
func TestRefusals(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	wrong := *b
	wrong.Key = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmc="
	err := send(t, wrong.Client(t), "jobs", &azservicebus.Message{Body: []byte("x")})
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("wrong key: err = %v, want code unauthorized", err)
	}
	err = send(t, b.Client(t), "nowhere", &azservicebus.Message{Body: []byte("x")})
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != amqp.ErrCondNotFound {
		t.Errorf("unknown queue: err = %v, want amqp:not-found", err)
	}
	if s := b.Stats(t); s.PutTokenFailures == 0 || s.Messages != 0 {
		t.Errorf("stats = %+v, want a failed put-token and no message", s)
	}
}

// TestAutoCreate: with auto-create, a queue exists once named.
func TestAutoCreate(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithAutoCreate())
	c := b.Client(t)
	if err := send(t, c, "inbox", &azservicebus.Message{Body: []byte("q")}); err != nil {
		t.Fatalf("send to a new queue: %v", err)
	}
	r, err := c.NewReceiverForQueue("inbox", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := receive(t, r); string(m.Body) != "q" {
		t.Errorf("queue received %q", m.Body)
	}
}
