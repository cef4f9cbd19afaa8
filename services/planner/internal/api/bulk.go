package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/planner/internal/jobs"
)

// MaxBulk is the most jobs one bulk request may hold (and the request stays under NATS's
// largest payload, 1 MiB by default).
const MaxBulk = 1000

// bulkRequest is the body of jobs.bulk.<collection>: job resources, each named.
type bulkRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// bulkItem is what the bulk operation reads of a job resource besides its definition: its name,
// "job" or, as Azure exports it, "collection/job".
type bulkItem struct {
	Name string `json:"name"`
}

// bulkResult is the outcome of one job of a bulk request.
type bulkResult struct {
	Name   string      `json:"name"`
	Status int         `json:"status"` // 201 created, 200 replaced, or the error's status
	Error  *jobs.Error `json:"error,omitempty"`
}

// bulkReply is the answer: one result per job, in the order of the request.
type bulkReply struct {
	Value []bulkResult `json:"value"`
}

// bulkPut puts many jobs of one collection in one request (create-only with If-None-Match: *):
// each is checked and stored as a put would be, in one round trip to Redis for all. A refusal
// is that job's own; the answer says what became of each.
func (a *handlers) bulkPut(ctx context.Context, r request) (any, micro.Headers, error) {
	c := r.names[0]
	var req bulkRequest
	if err := json.Unmarshal(r.body, &req); err != nil {
		return nil, nil, badRequest("", "the body is not {\"jobs\": [job resources]}: "+err.Error())
	}
	if len(req.Jobs) > MaxBulk {
		return nil, nil, badRequest("jobs", fmt.Sprintf("%d jobs; at most %d per request", len(req.Jobs), MaxBulk))
	}
	changes := make([]jobs.Change, len(req.Jobs))
	out := bulkReply{Value: make([]bulkResult, len(req.Jobs))}
	for i, raw := range req.Jobs {
		name, err := bulkName(raw, c, i)
		out.Value[i].Name = name
		if err != nil {
			out.Value[i].Error, out.Value[i].Status = err, err.Status
			continue
		}
		changes[i] = jobs.Change{Collection: c, Name: name, Raw: raw, CreateOnly: createOnly(r.headers)}
	}
	var todo []jobs.Change
	var at []int
	for i, ch := range changes {
		if out.Value[i].Error == nil {
			todo = append(todo, ch)
			at = append(at, i)
		}
	}
	for k, o := range a.svc.Apply(ctx, todo) {
		res := &out.Value[at[k]]
		var e *jobs.Error
		switch {
		case o.Err == nil && o.Created:
			res.Status = 201
		case o.Err == nil:
			res.Status = 200
		case errors.As(o.Err, &e):
			res.Status, res.Error = e.Status, e
		case errors.Is(o.Err, jobs.ErrNotChecked):
			res.Status, res.Error = 503, errNotChecked
		default:
			return nil, nil, o.Err // Redis: the whole request fails, to be sent again
		}
	}
	return out, nil, nil
}

// errNotChecked answers a job of a bulk request that was not checked nor stored in the time
// the request allows (package jobs: ErrNotChecked).
var errNotChecked = &jobs.Error{Status: 503, Code: CodeServerBusy, Message: "not checked nor stored: the jobs before it " +
	"in this request took the time allowed (client certificates take the longest to check); send it again, or fewer jobs at a time"}

// bulkName reads the name of the i-th job of a bulk request.
func bulkName(raw json.RawMessage, c string, i int) (string, *jobs.Error) {
	var item bulkItem
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&item); err != nil {
		return "", badRequest(fmt.Sprintf("jobs[%d]", i), "not a job resource: "+err.Error())
	}
	name := item.Name
	if coll, job, ok := strings.Cut(name, "/"); ok {
		if coll != c {
			return name, badRequest(fmt.Sprintf("jobs[%d].name", i), fmt.Sprintf("%q names collection %s, not %s", name, coll, c))
		}
		name = job
	}
	if name == "" {
		return "", badRequest(fmt.Sprintf("jobs[%d].name", i), "is required")
	}
	return name, nil
}
