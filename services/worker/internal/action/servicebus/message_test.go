package servicebus

import (
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

var meta = action.Meta{Collection: "billing", Job: "nightly", Scheduled: time.Date(2026, 3, 1, 9, 30, 0, 0, time.FixedZone("+02", 7200)),
	ExecutionTag: "0123456789abcdef0123456789abcdef", ClientRequestID: "6f9619ff-8b86-d011-b42d-00c04fc964ff", Attempt: 2, Region: "North Europe"}

func identity() map[string]any {
	return map[string]any{
		PropertyJobID:             "nightly",
		PropertyJobCollectionID:   "billing",
		PropertyExpectedExecution: "2026-03-01T07:30:00Z",
		PropertyExecutionTag:      "0123456789abcdef0123456789abcdef",
		PropertyClientRequestID:   "6f9619ff-8b86-d011-b42d-00c04fc964ff",
	}
}

func mustDateTime(t *testing.T, s string) *job.DateTime {
	d, err := job.ParseDateTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return &d
}

func with(m map[string]any, kv ...any) map[string]any {
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestNewMessage(t *testing.T) {
	ttl := job.DurationOf(90 * time.Second)
	scheduled := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   job.ServiceBusMessage
		want azservicebus.Message
	}{{
		name: "every brokered property",
		in: job.ServiceBusMessage{Message: "body", BrokeredMessageProperties: &job.BrokeredMessageProperties{
			ContentType: "Application/Json", CorrelationID: "corr", ForcePersistence: true, Label: "label",
			MessageID: "mid", PartitionKey: "pk", ReplyTo: "replies", ReplyToSessionID: "rsid",
			ScheduledEnqueueTimeUtc: mustDateTime(t, "2026-03-01T10:00:00"), SessionID: "sid", TimeToLive: &ttl,
			To: "dest", ViaPartitionKey: "via"},
			CustomMessageProperties: map[string]string{"appname": "FromScheduler"}},
		want: azservicebus.Message{Body: []byte("body"), ContentType: new("Application/Json"), CorrelationID: new("corr"),
			Subject: new("label"), MessageID: new("mid"), PartitionKey: new("pk"), ReplyTo: new("replies"),
			ReplyToSessionID: new("rsid"), ScheduledEnqueueTime: &scheduled, SessionID: new("sid"),
			TimeToLive: new(90 * time.Second), To: new("dest"),
			ApplicationProperties: with(identity(), "appname", "FromScheduler", PropertyForcePersistence, true, PropertyViaPartitionKey, "via")},
	}, {
		name: "no properties: the message id is the client request id",
		in:   job.ServiceBusMessage{Message: "plain"},
		want: azservicebus.Message{Body: []byte("plain"), MessageID: new(meta.ClientRequestID), ApplicationProperties: identity()},
	}, {
		name: "scheduled time with an offset is converted to UTC",
		in: job.ServiceBusMessage{BrokeredMessageProperties: &job.BrokeredMessageProperties{
			ScheduledEnqueueTimeUtc: mustDateTime(t, "2026-03-01T12:00:00+02:00")}},
		want: azservicebus.Message{Body: []byte{}, MessageID: new(meta.ClientRequestID), ScheduledEnqueueTime: &scheduled,
			ApplicationProperties: identity()},
	}, {
		name: "the scheduler's identity wins over a custom property of the same name",
		in:   job.ServiceBusMessage{Message: "x", CustomMessageProperties: map[string]string{PropertyJobID: "forged", "k": "v"}},
		want: azservicebus.Message{Body: []byte("x"), MessageID: new(meta.ClientRequestID), ApplicationProperties: with(identity(), "k", "v")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewMessage(&tt.in, meta)
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("NewMessage:\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}
