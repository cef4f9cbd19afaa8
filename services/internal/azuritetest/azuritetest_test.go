package azuritetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"

	"github.com/resched/resched/services/internal/azuritetest"
)

// TestSASRoundTrip checks the harness end to end: a queue made with the shared key, a message
// sent with a SAS token only, read back with the shared key; a SAS signed for another queue is
// refused, which shows Azurite really checks signatures.
func TestSASRoundTrip(t *testing.T) {
	a := azuritetest.Start(t)
	q := a.Queue(t, "harness")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	token := a.SASToken(t, "harness", sas.QueuePermissions{Add: true}, time.Now().Add(time.Hour))
	sasClient, err := azqueue.NewQueueClientWithNoCredential(a.ServiceURL()+"/harness?"+token, azuritetest.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sasClient.EnqueueMessage(ctx, "hello", nil); err != nil {
		t.Fatalf("enqueue with SAS: %v", err)
	}
	got, err := q.PeekMessage(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 || *got.Messages[0].MessageText != "hello" {
		t.Fatalf("peeked %+v, want one message \"hello\"", got.Messages)
	}

	other := a.SASToken(t, "elsewhere", sas.QueuePermissions{Add: true}, time.Now().Add(time.Hour))
	bad, err := azqueue.NewQueueClientWithNoCredential(a.ServiceURL()+"/harness?"+other, azuritetest.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.EnqueueMessage(ctx, "nope", nil)
	if !queueerror.HasCode(err, queueerror.AuthenticationFailed) {
		t.Fatalf("enqueue with another queue's SAS: err = %v, want AuthenticationFailed", err)
	}
}
