package servicebus_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/resched/resched/services/internal/sbfaketest"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/servicebus"
	"github.com/resched/resched/shared/job"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newDeliverer points a deliverer at the fake broker as at an emulator, closed after the test.
func newDeliverer(t *testing.T, b *sbfaketest.Broker) *servicebus.Deliverer {
	t.Helper()
	d, err := servicebus.New(servicebus.Config{Endpoint: b.Endpoint(), DevelopmentEmulator: true,
		ClientOptions: sbfaketest.ClientOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

func base(b *sbfaketest.Broker, body string) job.ServiceBusMessage {
	return job.ServiceBusMessage{Namespace: "resched-test", Message: body,
		Authentication: &job.ServiceBusAuthentication{Type: job.ServiceBusAuthSharedAccessKey, SASKeyName: b.KeyName, SASKey: b.Key}}
}

func queueAction(sb job.ServiceBusMessage, queue string) *job.ActionSpec {
	return &job.ActionSpec{Type: job.ActionServiceBusQueue, ServiceBusQueueMessage: &job.ServiceBusQueueMessage{ServiceBusMessage: sb, QueueName: queue}}
}

func topicAction(sb job.ServiceBusMessage, topic string) *job.ActionSpec {
	return &job.ActionSpec{Type: job.ActionServiceBusTopic, ServiceBusTopicMessage: &job.ServiceBusTopicMessage{ServiceBusMessage: sb, TopicPath: topic}}
}

func receiveOne(t *testing.T, r *azservicebus.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	got, err := r.ReceiveMessages(testContext(t), 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %d messages, err %v", len(got), err)
	}
	if err := r.CompleteMessage(testContext(t), got[0], nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	return got[0]
}

var meta = action.Meta{Collection: "billing", Job: "nightly", Scheduled: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC),
	ExecutionTag: "0123456789abcdef0123456789abcdef", ClientRequestID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", Region: "North Europe"}

// everything sets every brokered property and two custom ones.
func everything(t *testing.T, b *sbfaketest.Broker) job.ServiceBusMessage {
	sb := base(b, `{"report":"nightly"}`)
	ttl := job.DurationOf(10 * time.Minute)
	when, err := job.ParseDateTime("2020-01-02T03:04:05Z") // in the past: enqueued at once
	if err != nil {
		t.Fatal(err)
	}
	sb.BrokeredMessageProperties = &job.BrokeredMessageProperties{ContentType: "Application/Json", CorrelationID: "corr-42",
		ForcePersistence: true, Label: "report", MessageID: "msg-0001", PartitionKey: "pk-1", ReplyTo: "replies",
		ReplyToSessionID: "reply-session", ScheduledEnqueueTimeUtc: &when, SessionID: "session-1", TimeToLive: &ttl,
		To: "dest", ViaPartitionKey: "via-1"}
	sb.CustomMessageProperties = map[string]string{"appname": "FromScheduler", "tenant": "contoso"}
	return sb
}

// checkEverything checks a received message against everything and meta.
func checkEverything(t *testing.T, m *azservicebus.ReceivedMessage) {
	t.Helper()
	str := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	for _, c := range []struct{ field, got, want string }{
		{"body", string(m.Body), `{"report":"nightly"}`},
		{"ContentType", str(m.ContentType), "Application/Json"},
		{"CorrelationID", str(m.CorrelationID), "corr-42"},
		{"Subject (label)", str(m.Subject), "report"},
		{"MessageID", m.MessageID, "msg-0001"},
		{"PartitionKey", str(m.PartitionKey), "pk-1"},
		{"ReplyTo", str(m.ReplyTo), "replies"},
		{"ReplyToSessionID", str(m.ReplyToSessionID), "reply-session"},
		{"SessionID", str(m.SessionID), "session-1"},
		{"To", str(m.To), "dest"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if m.TimeToLive == nil || *m.TimeToLive != 10*time.Minute {
		t.Errorf("TimeToLive = %v, want 10m", m.TimeToLive)
	}
	if want := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC); m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(want) {
		t.Errorf("ScheduledEnqueueTime = %v, want %v", m.ScheduledEnqueueTime, want)
	}
	want := map[string]any{
		"appname": "FromScheduler", "tenant": "contoso",
		servicebus.PropertyForcePersistence: true, servicebus.PropertyViaPartitionKey: "via-1",
		"x-ms-scheduler-jobid": "nightly", "x-ms-scheduler-jobcollectionid": "billing",
		"x-ms-scheduler-expected-execution-time": "2026-03-01T09:30:00Z",
		"x-ms-scheduler-execution-tag":           meta.ExecutionTag, "x-ms-client-request-id": meta.ClientRequestID,
	}
	if !maps.Equal(m.ApplicationProperties, want) {
		t.Errorf("application properties:\n%v\nwant\n%v", m.ApplicationProperties, want)
	}
}

func TestQueueCarriesEveryProperty(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	d := newDeliverer(t, b)
	msg, err := d.Deliver(testContext(t), queueAction(everything(t, b), "jobs"), meta)
	if err != nil {
		t.Fatalf("deliver: %v", err)
	}
	if want := `Sent message msg-0001 to Service Bus queue "jobs" in namespace "resched-test"`; msg != want {
		t.Errorf("history message %q, want %q", msg, want)
	}
	r, err := b.Client(t).NewReceiverForQueue("jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkEverything(t, receiveOne(t, r))
	// On the wire the identity properties are plain strings, the content type as given.
	j := b.Messages(t)
	if len(j) != 1 || j[0].ContentType != "Application/Json" || j[0].ApplicationProperties["x-ms-scheduler-jobid"] != `Str8:"nightly"` {
		t.Errorf("journal = %+v", j)
	}
}

func TestTopicReachesEverySubscription(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithTopic("events", "audit", "billing"))
	d := newDeliverer(t, b)
	if _, err := d.Deliver(testContext(t), topicAction(everything(t, b), "events"), meta); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	for _, sub := range []string{"audit", "billing"} {
		r, err := b.Client(t).NewReceiverForSubscription("events", sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(sub, func(t *testing.T) { checkEverything(t, receiveOne(t, r)) })
	}
}

// TestClientReuse: deliveries to one namespace share one connection, and each entity's claims
// are negotiated once (the entity and its $management node), however many messages follow.
func TestClientReuse(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs", "other"), sbfaketest.WithTopic("events", "audit"))
	d := newDeliverer(t, b)
	actions := []*job.ActionSpec{queueAction(base(b, "1"), "jobs"), queueAction(base(b, "2"), "jobs"),
		topicAction(base(b, "3"), "events"), queueAction(base(b, "4"), "other"), queueAction(base(b, "5"), "jobs")}
	for _, a := range actions {
		if _, err := d.Deliver(testContext(t), a, meta); err != nil {
			t.Fatalf("deliver: %v", err)
		}
	}
	if got, want := b.Stats(t), (sbfaketest.Stats{Connections: 1, PutTokens: 6, Messages: 5}); got != want {
		t.Errorf("broker stats %+v, want %+v", got, want)
	}
}

// TestWrongKeyThenRotation: the broker refuses a wrong key (retryable: keys get rotated); the
// right key afterwards replaces the cached client and succeeds.
func TestWrongKeyThenRotation(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	d := newDeliverer(t, b)
	wrong := base(b, "x")
	wrong.Authentication = &job.ServiceBusAuthentication{SASKeyName: b.KeyName, SASKey: "bm90LXRoZS1rZXktbm90LXRoZS1rZXktbm90LXRoZS1rZXk="}
	msg, err := d.Deliver(testContext(t), queueAction(wrong, "jobs"), meta)
	if err == nil || action.IsPermanent(err) || !strings.Contains(err.Error(), "unauthorized") || msg != err.Error() {
		t.Fatalf("wrong key: message %q, err %v; want a retryable unauthorized error", msg, err)
	}
	if strings.Contains(msg, wrong.Authentication.SASKey) {
		t.Errorf("message holds the key: %q", msg)
	}
	if _, err := d.Deliver(testContext(t), queueAction(base(b, "x"), "jobs"), meta); err != nil {
		t.Fatalf("right key: %v", err)
	}
	if s := b.Stats(t); s.PutTokenFailures == 0 || s.Messages != 1 || s.Connections != 2 {
		t.Errorf("broker stats %+v, want a refused token, one message, two connections", s)
	}
}

// TestMissingEntityThenCreated: a missing queue is retryable, and the cached sender recovers
// once the queue exists.
func TestMissingEntityThenCreated(t *testing.T) {
	b := sbfaketest.Start(t)
	d := newDeliverer(t, b)
	a := queueAction(base(b, "x"), "later")
	_, err := d.Deliver(testContext(t), a, meta)
	if err == nil || action.IsPermanent(err) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing queue: err %v; want a retryable not-found error", err)
	}
	b.CreateQueue(t, "later")
	if _, err := d.Deliver(testContext(t), a, meta); err != nil {
		t.Fatalf("after creating the queue: %v", err)
	}
}

func TestPermanentFailures(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	d := newDeliverer(t, b)
	noKey := base(b, "x")
	noKey.Authentication = nil
	semicolon := base(b, "x")
	semicolon.Authentication = &job.ServiceBusAuthentication{SASKeyName: "a;Endpoint=sb://evil", SASKey: b.Key}
	badNamespace := base(b, "x")
	badNamespace.Namespace = "ns;UseDevelopmentEmulator=true"
	tests := []struct {
		name     string
		action   *job.ActionSpec
		contains string
	}{
		{"message too large", queueAction(base(b, strings.Repeat("x", 300<<10)), "jobs"), "larger than"},
		{"no payload", &job.ActionSpec{Type: job.ActionServiceBusQueue}, "without its Service Bus message"},
		{"topic type with a queue payload", &job.ActionSpec{Type: job.ActionServiceBusTopic,
			ServiceBusQueueMessage: queueAction(base(b, "x"), "jobs").ServiceBusQueueMessage}, "without its Service Bus message"},
		{"no key", queueAction(noKey, "jobs"), "key name and key are required"},
		{"semicolon in the key name", queueAction(semicolon, "jobs"), "semicolon"},
		{"bad namespace", queueAction(badNamespace, "jobs"), "namespace must be"},
		{"no queue name", queueAction(base(b, "x"), ""), "queue name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := d.Deliver(testContext(t), tt.action, meta)
			if !action.IsPermanent(err) || !strings.Contains(err.Error(), tt.contains) || msg != err.Error() {
				t.Errorf("message %q, err %v; want a permanent error containing %q", msg, err, tt.contains)
			}
			if strings.Contains(msg, b.Key) {
				t.Errorf("message holds the key: %q", msg)
			}
		})
	}
}

func TestClose(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	d := newDeliverer(t, b)
	if _, err := d.Deliver(testContext(t), queueAction(base(b, "x"), "jobs"), meta); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(testContext(t)); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := d.Deliver(testContext(t), queueAction(base(b, "x"), "jobs"), meta); err == nil || action.IsPermanent(err) {
		t.Errorf("deliver after close: err %v, want a retryable error", err)
	}
}

func TestNewRefusesBadEndpoints(t *testing.T) {
	for _, e := range []string{"amqps://{namespace}.servicebus.windows.net", "sb://", "sb://x;SharedAccessKey=y"} {
		if _, err := servicebus.New(servicebus.Config{Endpoint: e}); err == nil {
			t.Errorf("New(%q) accepted", e)
		}
	}
	if _, err := servicebus.New(servicebus.Config{}); err != nil {
		t.Errorf("New with the default endpoint: %v", err)
	}
}

// TestConcurrentDeliveries share one client and sender safely.
func TestConcurrentDeliveries(t *testing.T) {
	b := sbfaketest.Start(t, sbfaketest.WithQueue("jobs"))
	d := newDeliverer(t, b)
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := d.Deliver(testContext(t), queueAction(base(b, fmt.Sprint(i)), "jobs"), meta)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("deliver: %v", err)
		}
	}
	if s := b.Stats(t); s.Connections != 1 || s.Messages != n {
		t.Errorf("broker stats %+v, want one connection and %d messages", s, n)
	}
}
