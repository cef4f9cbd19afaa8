package schedapi

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
)

// count is a Requester that counts the requests sent, and answers as when no planner runs.
type count struct{ n int }

func (c *count) RequestMsgWithContext(context.Context, *nats.Msg) (*nats.Msg, error) {
	c.n++
	return nil, nats.ErrNoResponders
}

// A name the API cannot carry is refused before anything is sent: sent, it would reach no
// planner (or another operation), and the answer would say that none runs.
func TestANameTheAPICannotCarryIsNotSent(t *testing.T) {
	for _, name := range []string{"a.b", "*", ">", "", "a b"} {
		nc := &count{}
		_, err := Client{NC: nc, Subjects: bus.NewSubjects("")}.Call(context.Background(), nil, nil, "jobs", "get", "c", name)
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || nc.n != 0 {
			t.Errorf("job %q: %v after %d requests, want 400 and none sent", name, err, nc.n)
		}
	}
	nc := &count{}
	_, err := Client{NC: nc, Subjects: bus.NewSubjects("")}.Call(context.Background(), nil, nil, "jobs", "get", "c", "j")
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || nc.n != 1 {
		t.Errorf("a good name: %v after %d requests, want it sent", err, nc.n)
	}
}
