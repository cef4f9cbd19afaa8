package storagequeue_test

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"

	"github.com/resched/resched/services/internal/azuritetest"
	"github.com/resched/resched/services/internal/tlstest"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/storagequeue"
	"github.com/resched/resched/shared/job"
)

var meta = action.Meta{Collection: "billing", Job: "nightly-report",
	Scheduled:    time.Date(2026, 3, 1, 9, 30, 15, 0, time.UTC),
	ExecutionTag: "0123456789abcdef0123456789abcdef", ClientRequestID: "6f9619ff-8b86-d011-b42d-00c04fc964ff",
	Occurrence: 3, Attempt: 1, Region: "North Europe"}

func newDeliverer(t *testing.T, cfg storagequeue.Config) *storagequeue.Deliverer {
	t.Helper()
	if cfg.ClientOptions == nil {
		cfg.ClientOptions = azuritetest.ClientOptions()
	}
	d, err := storagequeue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func spec(queue, token, message string) *job.ActionSpec {
	return &job.ActionSpec{Type: job.ActionStorageQueue, QueueMessage: &job.StorageQueueMessage{
		StorageAccount: azuritetest.Account, QueueName: queue, SASToken: token, Message: message}}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func addToken(t *testing.T, a *azuritetest.Azurite, queue string) string {
	return a.SASToken(t, queue, sas.QueuePermissions{Add: true}, time.Now().Add(time.Hour))
}

// envelope is the XML a consumer reads back.
type envelope struct {
	XMLName                  xml.Name `xml:"StorageQueueMessage"`
	ExecutionTag             string
	ClientRequestID          string `xml:"ClientRequestId"`
	ExpectedExecutionTime    string
	SchedulerJobID           string `xml:"SchedulerJobId"`
	SchedulerJobCollectionID string `xml:"SchedulerJobCollectionId"`
	Region                   string
	Message                  string
}

// parse reads the envelope as a consumer would. The declaration says utf-16 (as the original's
// did) while the text is UTF-8, so the decoder is told to take the bytes as they are.
func parse(t *testing.T, text string) envelope {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(text))
	dec.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	var e envelope
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("parse envelope %q: %v", text, err)
	}
	return e
}

func dequeue(t *testing.T, q *azqueue.QueueClient) string {
	t.Helper()
	resp, err := q.DequeueMessage(testContext(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Messages) != 1 {
		t.Fatalf("dequeued %d messages, want 1", len(resp.Messages))
	}
	return *resp.Messages[0].MessageText
}

// An endpoint whose certificate a private CA signed (Azure Stack Hub, a TLS-inspecting proxy)
// is reached when the deliverer trusts that CA (RESCHED_WORKER_TARGET_CA), and refused when it
// does not.
func TestDeliverOverTLSWithAPrivateCA(t *testing.T) {
	ca := tlstest.NewCA(t, "private")
	a := azuritetest.StartTLS(t, ca)
	q := a.Queue(t, "jobs")
	token := addToken(t, a, "jobs")

	untrusting := newDeliverer(t, storagequeue.Config{Endpoint: a.Endpoint()})
	if _, err := untrusting.Deliver(testContext(t), spec("jobs", token, "x"), meta); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a deliverer without the CA: %v, want a certificate error", err)
	}
	trusting := newDeliverer(t, storagequeue.Config{Endpoint: a.Endpoint(), RootCAs: ca.Pool()})
	if _, err := trusting.Deliver(testContext(t), spec("jobs", token, "over TLS"), meta); err != nil {
		t.Fatalf("a deliverer with the CA: %v", err)
	}
	if got := parse(t, dequeue(t, q)); got.Message != "over TLS" {
		t.Errorf("dequeued %+v", got)
	}
}

func TestDeliverToAzurite(t *testing.T) {
	a := azuritetest.Start(t)
	q := a.Queue(t, "jobs")
	token := addToken(t, a, "jobs")
	d := newDeliverer(t, storagequeue.Config{Endpoint: a.Endpoint()})

	t.Run("envelope read back field by field", func(t *testing.T) {
		const message = "Tom & Jerry <3 \"quotes\" 'apostrophes'\r\nsecond line ✓"
		msg, err := d.Deliver(testContext(t), spec("jobs", "?"+token, message), meta)
		if err != nil {
			t.Fatalf("deliver: %v", err)
		}
		if !strings.Contains(msg, "Enqueued message") || !strings.Contains(msg, `"jobs"`) || strings.Contains(msg, "sig=") {
			t.Errorf("history message %q", msg)
		}
		text := dequeue(t, q)
		if !strings.HasPrefix(text, `<?xml version="1.0" encoding="utf-16"?>`+"\r\n<StorageQueueMessage ") {
			t.Errorf("envelope starts %q", text[:min(len(text), 80)])
		}
		want := envelope{XMLName: xml.Name{Local: "StorageQueueMessage"}, ExecutionTag: meta.ExecutionTag,
			ClientRequestID: meta.ClientRequestID, ExpectedExecutionTime: "2026-03-01T09:30:15",
			SchedulerJobID: "nightly-report", SchedulerJobCollectionID: "billing", Region: "North Europe", Message: message}
		if got := parse(t, text); got != want {
			t.Errorf("envelope read back:\n%+v\nwant\n%+v", got, want)
		}
		if strings.Contains(text, "Z</ExpectedExecutionTime>") {
			t.Errorf("expected execution time carries a zone: %q", text)
		}
	})

	t.Run("base64", func(t *testing.T) {
		d := newDeliverer(t, storagequeue.Config{Endpoint: a.Endpoint(), Base64: true})
		if _, err := d.Deliver(testContext(t), spec("jobs", token, "b64"), meta); err != nil {
			t.Fatalf("deliver: %v", err)
		}
		raw, err := base64.StdEncoding.DecodeString(dequeue(t, q))
		if err != nil {
			t.Fatalf("not base64: %v", err)
		}
		if got := parse(t, string(raw)); got.Message != "b64" {
			t.Errorf("message %q, want b64", got.Message)
		}
	})
}

// TestFailures checks which failures the executor may retry, and that no failure text holds
// the SAS signature.
func TestFailures(t *testing.T) {
	a := azuritetest.Start(t)
	a.Queue(t, "jobs")
	d := newDeliverer(t, storagequeue.Config{Endpoint: a.Endpoint()})
	good := addToken(t, a, "jobs")
	readOnly := a.SASToken(t, "jobs", sas.QueuePermissions{Read: true}, time.Now().Add(time.Hour))

	tests := []struct {
		name      string
		spec      *job.ActionSpec
		permanent bool
		contains  string
	}{
		{"SAS for another queue", spec("jobs", addToken(t, a, "other"), "x"), false, "403"},
		{"SAS without add permission", spec("jobs", readOnly, "x"), false, "403"},
		{"queue does not exist (yet)", spec("missing", addToken(t, a, "missing"), "x"), false, "404 QueueNotFound"},
		{"message over 64 KiB", spec("jobs", good, strings.Repeat("x", 70<<10)), true, "the service answered 4"},
		{"no queue message", &job.ActionSpec{Type: job.ActionStorageQueue}, true, "without queueMessage"},
		{"bad account name", &job.ActionSpec{Type: job.ActionStorageQueue, QueueMessage: &job.StorageQueueMessage{
			StorageAccount: "Bad.Account", QueueName: "jobs", SASToken: good}}, true, "storage account name"},
		{"bad queue name", spec("Jobs/../x", good, "x"), true, "queue name"},
		{"no SAS token", spec("jobs", "", "x"), true, "SAS token is missing"},
		{"SAS URL instead of token", spec("jobs", a.ServiceURL()+"/jobs?"+good, "x"), true, "not a URL query string"},
		{"message XML cannot carry", spec("jobs", good, "\x00"), true, "cannot be carried in XML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := d.Deliver(testContext(t), tt.spec, meta)
			if err == nil {
				t.Fatalf("deliver succeeded: %s", msg)
			}
			if action.IsPermanent(err) != tt.permanent {
				t.Errorf("permanent = %v, want %v (err %v)", action.IsPermanent(err), tt.permanent, err)
			}
			if !strings.Contains(err.Error(), tt.contains) || msg != err.Error() {
				t.Errorf("err %q / message %q, want both to contain %q", err, msg, tt.contains)
			}
			t.Logf("history message: %s", msg)
			if strings.Contains(err.Error(), "sig=") {
				t.Errorf("error text holds the signature: %q", err)
			}
		})
	}
}

func TestTimeOutAndCancel(t *testing.T) {
	d := newDeliverer(t, storagequeue.Config{Endpoint: "http://" + newHole(t).addr + "/{account}"})
	const token = "sv=2020-02-10&se=2099-01-01T00%3A00%3A00Z&sp=a&spr=https%2Chttp&sig=c2VjcmV0"

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	msg, err := d.Deliver(ctx, spec("jobs", token, "x"), meta)
	if !errors.Is(err, context.DeadlineExceeded) || action.IsPermanent(err) {
		t.Errorf("time-out: err = %v, want a retryable deadline error", err)
	}
	if strings.Contains(msg, "c2VjcmV0") {
		t.Errorf("history message holds the signature: %q", msg)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := d.Deliver(ctx, spec("jobs", token, "x"), meta); !errors.Is(err, context.Canceled) || action.IsPermanent(err) {
		t.Errorf("cancelled: err = %v, want a retryable cancellation", err)
	}
}

func TestNewRefusesBadEndpoints(t *testing.T) {
	for _, e := range []string{"ftp://{account}.example", "not a url", "https://{account}.queue.core.windows.net?x=1"} {
		if _, err := storagequeue.New(storagequeue.Config{Endpoint: e}); err == nil {
			t.Errorf("New(%q) accepted", e)
		}
	}
	if _, err := storagequeue.New(storagequeue.Config{}); err != nil {
		t.Errorf("New with the default endpoint: %v", err)
	}
}
