package api

import (
	"cmp"
	"context"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/shared/job"
)

// The job operations; names are the collection and the job.

func (a *handlers) putJob(ctx context.Context, r request) (any, micro.Headers, error) {
	d, ok, err := a.svc.PutJob(ctx, r.names[0], r.names[1], r.body, createOnly(r.headers))
	if err != nil {
		return nil, nil, err
	}
	return d, created(ok), nil
}

func (a *handlers) patchJob(ctx context.Context, r request) (any, micro.Headers, error) {
	d, err := a.svc.PatchJob(ctx, r.names[0], r.names[1], r.body)
	return d, nil, err
}

func (a *handlers) getJob(ctx context.Context, r request) (any, micro.Headers, error) {
	d, err := a.svc.GetJob(ctx, r.names[0], r.names[1])
	return d, nil, err
}

func (a *handlers) deleteJob(ctx context.Context, r request) (any, micro.Headers, error) {
	return empty{}, nil, a.svc.DeleteJob(ctx, r.names[0], r.names[1])
}

func (a *handlers) listJobs(ctx context.Context, r request) (any, micro.Headers, error) {
	state, page, err := decodeJobList(r.body)
	if err != nil {
		return nil, nil, err
	}
	return fitted(a.maxReply(), page, func(page jobs.PageRequest) (jobs.Page[*job.Definition], error) {
		return a.svc.ListJobs(ctx, r.names[0], state, page)
	})
}

func (a *handlers) runJob(ctx context.Context, r request) (any, micro.Headers, error) {
	return empty{}, nil, a.svc.RunJob(ctx, r.names[0], r.names[1])
}

func (a *handlers) history(ctx context.Context, r request) (any, micro.Headers, error) {
	status, page, err := decodeHistory(r.body)
	if err != nil {
		return nil, nil, err
	}
	return fitted(a.maxReply(), page, func(page jobs.PageRequest) (jobs.Page[job.HistoryEntry], error) {
		return a.svc.History(ctx, r.names[0], r.names[1], status, page)
	})
}

// previewReply lists the executions as RFC 3339 UTC times with whole seconds, the format of
// `schedctl preview` (docs/recurrence.md §10).
type previewReply struct {
	Value  []string `json:"value"`
	Reason string   `json:"reason,omitempty"` // why fewer than asked for: the series ends
	// Local are the same times in the schedule's time zone, with its offset then: a change of
	// offset between two runs is a daylight-saving change (the dashboard marks it).
	Local []string `json:"local,omitempty"`
}

func (a *handlers) preview(_ context.Context, r request) (any, micro.Headers, error) {
	pr, err := decodePreview(r.body)
	if err != nil {
		return nil, nil, err
	}
	times, reason, err := a.svc.Preview(pr)
	if err != nil {
		return nil, nil, err
	}
	out := previewReply{Value: make([]string, len(times)), Local: make([]string, len(times)), Reason: reason}
	for i, t := range times {
		out.Value[i] = t.UTC().Format(time.RFC3339)
		out.Local[i] = t.Format(time.RFC3339)
	}
	return out, nil, nil
}

// runsRequest is the body of jobs.runs.
type runsRequest struct {
	Count int `json:"count"`
}

func (a *handlers) runs(ctx context.Context, r request) (any, micro.Headers, error) {
	var req runsRequest
	if err := decodeBody(r.body, &req); err != nil {
		return nil, nil, err
	}
	if err := checkCount(req.Count); err != nil {
		return nil, nil, err
	}
	runs, err := a.svc.Runs(ctx, r.names[0], r.names[1], cmp.Or(req.Count, 10))
	return runs, nil, err
}
