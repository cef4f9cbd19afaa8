package arm

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/gateway/internal/schedapi"
)

// planners is the scheduler's NATS API with its errors in ARM's shape.
type planners struct{ client schedapi.Client }

func (p planners) call(ctx context.Context, body any, out any, tokens ...string) (*nats.Msg, error) {
	reply, err := p.client.Call(ctx, body, out, tokens...)
	return reply, armError(err)
}

// armError gives a planner's error ARM's shape: its details name the field under properties.
func armError(err error) error {
	var e *schedapi.Error
	if !errors.As(err, &e) {
		return err
	}
	a := &apiError{Status: e.Status, Code: e.Code, Message: e.Message}
	for _, d := range e.Details {
		a.Details = append(a.Details, errorDetail{Code: e.Code, Target: "properties." + d.Path, Message: d.Message})
	}
	return a
}
