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
	// A job's paths are relative to its properties; a collection's to the resource already
	// (properties.quota.maxJobCount).
	under := ""
	if len(tokens) > 0 && tokens[0] == "jobs" {
		under = "properties."
	}
	return reply, armError(err, under)
}

// armError gives a planner's error ARM's shape: its details name the field, its path after
// under, and none when the error is the body's as a whole (not JSON at all).
func armError(err error, under string) error {
	var e *schedapi.Error
	if !errors.As(err, &e) {
		return err
	}
	a := &apiError{Status: e.Status, Code: e.Code, Message: e.Message}
	for _, d := range e.Details {
		detail := errorDetail{Code: e.Code, Message: d.Message}
		if d.Path != "" {
			detail.Target = under + d.Path
		}
		a.Details = append(a.Details, detail)
	}
	return a
}
