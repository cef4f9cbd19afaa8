package e2e

import (
	"context"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"

	"github.com/resched/resched/services/internal/azuritetest"
	"github.com/resched/resched/services/internal/sbfaketest"
)

// The job definitions, in the Azure Scheduler shape (the properties alone).

func httpRecurring(target string, first time.Time) map[string]any {
	return map[string]any{
		"startTime":  first.Format(time.RFC3339),
		"action":     map[string]any{"type": "Http", "request": map[string]any{"uri": target + "/e2e/http", "method": "GET"}},
		"recurrence": map[string]any{"frequency": "Second", "interval": 2, "count": 3},
	}
}

func httpOnce(uri, body string) map[string]any {
	return map[string]any{"action": map[string]any{"type": "Http", "request": map[string]any{"uri": uri, "method": "POST", "body": body}}}
}

func httpFailing(target string) map[string]any {
	return map[string]any{"action": map[string]any{
		"type":        "Http",
		"request":     map[string]any{"uri": target + "/fail/e2e", "method": "POST", "body": "fail"},
		"retryPolicy": map[string]any{"retryType": "Fixed", "retryInterval": "PT1S", "retryCount": 2},
		"errorAction": map[string]any{"type": "Http", "request": map[string]any{"uri": target + "/error-action", "method": "POST", "body": "failed"}},
	}}
}

// httpRetrying fails at the target and is retried twice, 3 s apart, with no error action.
func httpRetrying(target, name string) map[string]any {
	return map[string]any{"action": map[string]any{
		"type":        "Http",
		"request":     map[string]any{"uri": target + "/fail/" + name, "method": "POST"},
		"retryPolicy": map[string]any{"retryType": "Fixed", "retryInterval": "PT3S", "retryCount": 2},
	}}
}

var sasAdd = sas.QueuePermissions{Add: true}

// storageMessage needs escaping in the envelope.
const storageMessage = "rebuild <the index> & tell us"

func storageJob(sasToken string) map[string]any {
	return map[string]any{"action": map[string]any{
		"type": "StorageQueue",
		"queueMessage": map[string]any{
			"storageAccount": azuritetest.Account, "queueName": storageQueue, "sasToken": sasToken, "message": storageMessage,
		},
	}}
}

func sbAuth(b *sbfaketest.Broker) map[string]any {
	return map[string]any{"type": "SharedAccessKey", "sasKeyName": b.KeyName, "sasKey": b.Key}
}

func sbQueueJob(b *sbfaketest.Broker) map[string]any {
	return map[string]any{"action": map[string]any{
		"type": "ServiceBusQueue",
		"serviceBusQueueMessage": map[string]any{
			"namespace": "e2e", "queueName": sbQueue, "message": `{"kind":"settlement"}`, "transportType": "AMQP",
			"authentication":            sbAuth(b),
			"brokeredMessageProperties": map[string]any{"contentType": "application/json", "label": "settlement"},
			"customMessageProperties":   map[string]any{"appname": "FromScheduler"},
		},
	}}
}

func sbTopicJob(b *sbfaketest.Broker) map[string]any {
	return map[string]any{"action": map[string]any{
		"type": "ServiceBusTopic",
		"serviceBusTopicMessage": map[string]any{
			"namespace": "e2e", "topicPath": sbTopic, "message": "weekly digest",
			"authentication":            sbAuth(b),
			"brokeredMessageProperties": map[string]any{"correlationId": "digest"},
		},
	}}
}

// envelope is the Storage Queue message the worker writes (reference, section 6.10).
type envelope struct {
	XMLName                  xml.Name `xml:"StorageQueueMessage"`
	ExecutionTag             string
	ClientRequestId          string
	ExpectedExecutionTime    string
	SchedulerJobId           string
	SchedulerJobCollectionId string
	Region                   string
	Message                  string
}

// checkStorageQueue waits for the storage job's message in Azurite and reads its envelope.
func checkStorageQueue(t *testing.T, q *azqueue.QueueClient, begin time.Time) {
	var text string
	eventually(t, "a message in queue "+storageQueue, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := q.PeekMessages(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		if len(resp.Messages) == 0 || resp.Messages[0].MessageText == nil {
			return false, "no message"
		}
		text = *resp.Messages[0].MessageText
		return true, ""
	})
	// The envelope declares utf-16, as the original's did, over text that is UTF-8 (as the
	// original's was in practice): read it as it is.
	dec := xml.NewDecoder(strings.NewReader(text))
	dec.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	var e envelope
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("decode the envelope %q: %v", text, err)
	}
	expected, err := time.Parse("2006-01-02T15:04:05", e.ExpectedExecutionTime)
	if err != nil || expected.Before(begin) || expected.After(time.Now()) {
		t.Errorf("ExpectedExecutionTime %q: want a time since %s without a zone (%v)", e.ExpectedExecutionTime, begin, err)
	}
	if e.SchedulerJobId != "storage" || e.SchedulerJobCollectionId != collection || e.Message != storageMessage ||
		e.ExecutionTag == "" || e.ClientRequestId == "" || e.Region == "" {
		t.Errorf("envelope %+v, want job %s/storage, message %q, a tag, a request id and a region", e, collection, storageMessage)
	}
}

// receiveQueue receives one message from a queue of the fake broker.
func receiveQueue(t *testing.T, b *sbfaketest.Broker, queue string) *azservicebus.ReceivedMessage {
	t.Helper()
	r, err := b.Client(t).NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatalf("receiver for queue %s: %v", queue, err)
	}
	return receiveOne(t, r, "queue "+queue)
}

// receiveSubscription receives one message from a topic subscription of the fake broker.
func receiveSubscription(t *testing.T, b *sbfaketest.Broker, topic, subscription string) *azservicebus.ReceivedMessage {
	t.Helper()
	r, err := b.Client(t).NewReceiverForSubscription(topic, subscription, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatalf("receiver for %s/%s: %v", topic, subscription, err)
	}
	return receiveOne(t, r, "topic "+topic+" subscription "+subscription)
}

func receiveOne(t *testing.T, r *azservicebus.Receiver, from string) *azservicebus.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deliveryTimeout)
	defer cancel()
	defer r.Close(context.Background())
	got, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive from %s within %s: %d messages, %v", from, deliveryTimeout, len(got), err)
	}
	return got[0]
}

// sbWant is what a Service Bus job's message must hold besides the scheduler's identity.
type sbWant struct {
	job, body                           string
	contentType, subject, correlationID string
	custom                              map[string]any
}

// checkServiceBus checks a received message: body, brokered and custom properties, and the
// scheduler's identity as application properties.
func checkServiceBus(t *testing.T, m *azservicebus.ReceivedMessage, want sbWant, begin time.Time) {
	if string(m.Body) != want.body {
		t.Errorf("body %q, want %q", m.Body, want.body)
	}
	for _, f := range []struct {
		name string
		got  *string
		want string
	}{
		{"contentType", m.ContentType, want.contentType},
		{"subject (label)", m.Subject, want.subject},
		{"correlationId", m.CorrelationID, want.correlationID},
	} {
		if deref(f.got) != f.want {
			t.Errorf("%s %q, want %q", f.name, deref(f.got), f.want)
		}
	}
	p := m.ApplicationProperties
	for k, v := range want.custom {
		if p[k] != v {
			t.Errorf("custom property %s = %v, want %v", k, p[k], v)
		}
	}
	if p["x-ms-scheduler-jobid"] != want.job || p["x-ms-scheduler-jobcollectionid"] != collection {
		t.Errorf("job properties %v / %v, want %s / %s", p["x-ms-scheduler-jobcollectionid"], p["x-ms-scheduler-jobid"], collection, want.job)
	}
	expected, _ := p["x-ms-scheduler-expected-execution-time"].(string)
	if e, err := time.Parse(time.RFC3339, expected); err != nil || e.Before(begin) || e.After(time.Now()) {
		t.Errorf("expected execution time %q, want an RFC 3339 time since %s (%v)", expected, begin, err)
	}
	tag, _ := p["x-ms-scheduler-execution-tag"].(string)
	request, _ := p["x-ms-client-request-id"].(string)
	if tag == "" || request == "" || m.MessageID != request {
		t.Errorf("execution tag %q, client request id %q, message id %q: want a tag, and the request id as the message id", tag, request, m.MessageID)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
