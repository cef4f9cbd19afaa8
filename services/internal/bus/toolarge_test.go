package bus_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/jobschema"
)

// Only a refusal for the message's size counts as for good: the planner parks a job for it and
// a worker splits its results, so a passing fault taken for one would stop a schedule. The
// stream's limit is also met end to end (TestOccurrenceRefusedForGoodParksItsJob); the
// server's max_payload is checked by the client before the message leaves.
func TestTooLarge(t *testing.T) {
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
		if got := bus.TooLarge(c.err); got != c.want {
			t.Errorf("TooLarge(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// The stream limits the planner checks follow the largest definition it accepts.
func TestMaxDefinitionIsTheSchemaLimit(t *testing.T) {
	if bus.MaxDefinition != jobschema.MaxJobSize {
		t.Fatalf("bus.MaxDefinition %d, jobschema.MaxJobSize %d", bus.MaxDefinition, jobschema.MaxJobSize)
	}
}
