package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/jobs"
)

// CodeInternal is the code of an error the client cannot act on (Redis down, a bug).
const CodeInternal = jobs.CodeInternal

// CodeServerBusy is the code of a request this planner cannot take now (503): sent again, it
// reaches a planner that can.
const CodeServerBusy = jobs.CodeServerBusy

// errorReply is the body of an error reply, in the shape Azure Resource Manager used.
type errorReply struct {
	Error *jobs.Error `json:"error"`
}

// empty is the answer of an operation that has nothing to return (delete, run).
type empty struct{}

// reply encodes v as the answer to req (a json.RawMessage is encoded already).
func (a *handlers) reply(req micro.Request, v any, h micro.Headers) answer {
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return a.fail(req, err)
		}
	}
	return answer{code: 200, data: b, header: nats.Header(h)}
}

// send publishes an answer to the request's reply subject. It does not go through micro's
// Respond and Error: those write to the request, which micro reads once the handler has
// returned, and the handler returns as soon as a worker has the request, so an answer written
// by the worker raced with that read (the race detector found it; an interface read while it
// is written can be torn). The endpoints' own statistics (statsOf) count the answers instead.
func (a *handlers) send(req micro.Request, ans answer) {
	if req.Reply() == "" {
		return // a publish, not a request: nobody waits for an answer
	}
	if err := a.nc.PublishMsg(&nats.Msg{Subject: req.Reply(), Data: ans.data, Header: ans.header}); err != nil {
		a.log.Warn("api reply", "subject", req.Subject(), "status", ans.code, "error", err)
	}
}

// fitted asks list for a page, and again for half as many items while the page's encoding is
// larger than max bytes: NATS refuses a reply over its max_payload (1 MiB by default), and
// the client waited until its timeout. 100 jobs of 11 KB, or 1,000 history entries of 2 KiB,
// are larger. The page's nextLink goes on from where the smaller page ends.
func fitted[T any](max int, page jobs.PageRequest, list func(jobs.PageRequest) (jobs.Page[T], error)) (any, micro.Headers, error) {
	for {
		p, err := list(page)
		if err != nil {
			return nil, nil, err
		}
		b, err := json.Marshal(p)
		if err != nil || len(b) <= max {
			return json.RawMessage(b), nil, err
		}
		if len(p.Value) <= 1 {
			return nil, nil, &jobs.Error{Status: 500, Code: CodeInternal, Message: fmt.Sprintf(
				"one item of this listing takes %d bytes, more than a NATS message may hold here (%d): raise the server's max_payload", len(b), max)}
		}
		page.Top = len(p.Value) / 2
	}
}

// fail is the answer to req of err: a *jobs.Error as it is, a refusal of Redis's as jobs.StoreRefused
// says, anything else as an internal error whose cause is logged. The body never echoes the
// request, which can hold secrets, nor a cause the client cannot act on.
func (a *handlers) fail(req micro.Request, err error) answer {
	var e *jobs.Error
	if !errors.As(err, &e) {
		if e = jobs.StoreRefused(err); e != nil { // the operator's to act on, not a fault of ours
			a.log.Warn("api request refused by Redis", "subject", req.Subject(), "error", err)
		} else {
			// The cause goes to the log only: it can name Redis's address or a key, and the
			// client, maybe another team's, can do nothing with it.
			a.log.Error("api request failed", "subject", req.Subject(), "error", err)
			e = &jobs.Error{Status: 500, Code: CodeInternal, Message: "the planner failed to answer (an internal error; " +
				"its log has the cause, as 'api request failed')"}
		}
	}
	status := e.Status
	if status == 0 {
		status = 500
	}
	body, mErr := json.Marshal(errorReply{Error: e})
	if mErr != nil { // a jobs.Error is plain strings: this cannot fail, but never answer nothing
		body = []byte(`{"error":{"code":"InternalError","message":"encode error reply"}}`)
	}
	h := nats.Header{micro.ErrorHeader: {headerText(e.Message)}, micro.ErrorCodeHeader: {strconv.Itoa(status)}}
	return answer{code: status, message: headerText(e.Message), data: body, header: h}
}

// headerText makes a message fit a header value: one line, never empty (micro refuses that).
func headerText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "error"
	}
	return s
}

// badRequest is a 400 about one field of the request.
func badRequest(path, message string) *jobs.Error {
	// The message names the field too: it is also the Nats-Service-Error header, which is all
	// many clients show.
	named := message
	if path != "" && !strings.HasPrefix(message, path+" ") { // "job name …" names it already
		named = path + ": " + message
	}
	return &jobs.Error{Status: 400, Code: jobs.CodeBadRequest, Message: "the request is invalid: " + named,
		Details: []bus.ErrorEntry{{Path: path, Message: message}}}
}

// HeaderIfNoneMatch on a put request, with the value "*", makes it create-only: it fails with
// Conflict (409) when the resource exists, rather than replacing it (HTTP's If-None-Match).
const HeaderIfNoneMatch = "If-None-Match"

func createOnly(h micro.Headers) bool { return h.Get(HeaderIfNoneMatch) == "*" }

// created is the header of a put's reply.
func created(ok bool) micro.Headers {
	return micro.Headers{HeaderCreated: []string{strconv.FormatBool(ok)}}
}
