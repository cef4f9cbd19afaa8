// Package schedapi is the scheduler's NATS API (docs/nats-api.md) as the gateway's front ends
// (the ARM REST surface, the dashboard) call it: a request to <prefix>.api.<operation>, the
// answer decoded, an error answer turned into an *Error with the planner's status and message.
package schedapi

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
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/shared/job"
)

// Requester sends a request to the planners and waits for the answer: a *nats.Conn.
type Requester interface {
	RequestMsgWithContext(ctx context.Context, msg *nats.Msg) (*nats.Msg, error)
}

// Client calls the planners.
type Client struct {
	NC       Requester
	Subjects bus.Subjects
}

// Error is an error answer of the planners, or their absence.
type Error struct {
	Status  int // HTTP-like
	Code    string
	Message string
	Details []bus.ErrorEntry // one per bad field, with its JSON path
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Call sends body (nil, []byte, or a value to encode) to <prefix>.api.<tokens...> and decodes a
// successful answer into out (when not nil).
// A token that is no name of the API (a dot, a wildcard, nothing) is refused here: its subject
// would reach no planner, or another operation, and "no planner answered" would be wrong.
func (c Client) Call(ctx context.Context, body any, out any, tokens ...string) (*nats.Msg, error) {
	for _, t := range tokens {
		if err := bus.CheckName("collection or job", t); err != nil {
			return nil, &Error{Status: http.StatusBadRequest, Code: "BadRequest", Message: err.Error()}
		}
	}
	msg := nats.NewMsg(c.Subjects.API(tokens...))
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
	return c.Send(ctx, msg, out)
}

// Send sends a prepared request (one with headers).
func (c Client) Send(ctx context.Context, msg *nats.Msg, out any) (*nats.Msg, error) {
	reply, err := c.NC.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: "ServerBusy", Message: "no scheduler planner answered (none is running, or none can be reached through this gateway's NATS server); try again later"}
	case errors.Is(err, natsconn.ErrConnectionLost):
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: "ServerBusy",
			Message: "the connection to the scheduler was lost before it answered, so whether it was done is not known; try again (a GET, PUT or DELETE may be sent again as it was)"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, &Error{Status: http.StatusGatewayTimeout, Code: "OperationTimedOut", Message: "the scheduler did not answer in time; try again"}
	case err != nil:
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: "ServerBusy", Message: "the scheduler cannot be reached: " + err.Error()}
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

func decodeError(code string, reply *nats.Msg) *Error {
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
	e := &Error{Status: status, Code: "InternalError", Message: reply.Header.Get(micro.ErrorHeader)}
	if json.Unmarshal(reply.Data, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Details = body.Error.Code, body.Error.Message, body.Error.Details
	}
	return e
}

// Collections reads every collection of the planners, page by page.
func (c Client) Collections(ctx context.Context) ([]job.Collection, error) {
	var all []job.Collection
	var req any = map[string]int{"top": 1000}
	for {
		var page struct {
			Value    []job.Collection `json:"value"`
			NextLink json.RawMessage  `json:"nextLink"`
		}
		if _, err := c.Call(ctx, req, &page, "collections", "list"); err != nil {
			return nil, err
		}
		all = append(all, page.Value...)
		if len(page.NextLink) == 0 || string(page.NextLink) == "null" {
			return all, nil
		}
		req = []byte(page.NextLink)
	}
}
