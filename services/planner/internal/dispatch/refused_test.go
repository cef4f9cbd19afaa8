package dispatch

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Only a refusal of the message itself parks a job; every failure on the way is retried, since
// parking a job for a passing fault would stop its schedule. The stream's size limit is also
// tested end to end (TestOccurrenceRefusedForGoodParksItsJob); the server's max_payload is
// checked by the client before the message leaves.
func TestRefusedForGood(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nats.ErrMaxPayload, true},
		{fmt.Errorf("publish: %w", nats.ErrMaxPayload), true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10077}, false}, // the store failed (stream full, disk)
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest}, false},
		{jetstream.ErrNoStreamResponse, false},
		{nats.ErrDisconnected, false},
		{jetstream.ErrAsyncPublishTimeout, false},
		{context.DeadlineExceeded, false},
	} {
		if got := refusedForGood(c.err); got != c.want {
			t.Errorf("refusedForGood(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
