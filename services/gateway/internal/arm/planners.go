package arm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/bus"
)

// Requester sends a request to the planners and waits for the answer: a *nats.Conn.
type Requester interface {
	RequestMsgWithContext(ctx context.Context, msg *nats.Msg) (*nats.Msg, error)
}

// planners is the scheduler's NATS API (docs/nats-api.md) as the gateway calls it.
type planners struct {
	nc       Requester
	subjects bus.Subjects
}

// call sends body to <prefix>.api.<tokens...> and decodes a successful answer into out (when
// not nil). An error answer comes back as an *apiError with the planner's status and message.
func (p planners) call(ctx context.Context, body any, out any, tokens ...string) (*nats.Msg, error) {
	msg := nats.NewMsg(p.subjects.API(tokens...))
	switch b := body.(type) {
	case nil:
	case []byte:
		msg.Data = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		msg.Data = data
	}
	return p.send(ctx, msg, out)
}

// send sends a prepared request (one with headers).
func (p planners) send(ctx context.Context, msg *nats.Msg, out any) (*nats.Msg, error) {
	reply, err := p.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: "ServerBusy", Message: "no scheduler planner is running; try again later"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, &apiError{Status: http.StatusGatewayTimeout, Code: "OperationTimedOut", Message: "the scheduler did not answer in time; try again"}
	case err != nil:
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: "ServerBusy", Message: "the scheduler cannot be reached: " + err.Error()}
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, decodeError(code, reply)
	}
	if out != nil {
		if err := json.Unmarshal(reply.Data, out); err != nil {
			return nil, fmt.Errorf("decode the planner's answer to %s: %w", msg.Subject, err)
		}
	}
	return reply, nil
}

// decodeError turns a planner's error answer into the ARM error it stands for.
func decodeError(code string, reply *nats.Msg) *apiError {
	status, err := strconv.Atoi(code)
	if err != nil || status < 400 {
		status = http.StatusInternalServerError
	}
	var body struct {
		Error struct {
			Code    string           `json:"code"`
			Message string           `json:"message"`
			Details []bus.ErrorEntry `json:"details"`
		} `json:"error"`
	}
	e := &apiError{Status: status, Code: "InternalError", Message: reply.Header.Get(micro.ErrorHeader)}
	if json.Unmarshal(reply.Data, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		for _, d := range body.Error.Details {
			e.Details = append(e.Details, errorDetail{Code: e.Code, Target: "properties." + d.Path, Message: d.Message})
		}
	}
	return e
}
