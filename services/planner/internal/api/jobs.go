package api

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// The job operations; names are the collection and the job.

func (a *handlers) putJob(ctx context.Context, names []string, body []byte) (any, micro.Headers, error) {
	d, ok, err := a.svc.PutJob(ctx, names[0], names[1], body)
	if err != nil {
		return nil, nil, err
	}
	return d, created(ok), nil
}

func (a *handlers) patchJob(ctx context.Context, names []string, body []byte) (any, micro.Headers, error) {
	d, err := a.svc.PatchJob(ctx, names[0], names[1], body)
	return d, nil, err
}

func (a *handlers) getJob(ctx context.Context, names []string, _ []byte) (any, micro.Headers, error) {
	d, err := a.svc.GetJob(ctx, names[0], names[1])
	return d, nil, err
}

func (a *handlers) deleteJob(ctx context.Context, names []string, _ []byte) (any, micro.Headers, error) {
	return empty{}, nil, a.svc.DeleteJob(ctx, names[0], names[1])
}

func (a *handlers) listJobs(ctx context.Context, names []string, body []byte) (any, micro.Headers, error) {
	state, page, err := decodeJobList(body)
	if err != nil {
		return nil, nil, err
	}
	p, err := a.svc.ListJobs(ctx, names[0], state, page)
	return p, nil, err
}

func (a *handlers) runJob(ctx context.Context, names []string, _ []byte) (any, micro.Headers, error) {
	return empty{}, nil, a.svc.RunJob(ctx, names[0], names[1])
}

func (a *handlers) history(ctx context.Context, names []string, body []byte) (any, micro.Headers, error) {
	status, page, err := decodeHistory(body)
	if err != nil {
		return nil, nil, err
	}
	p, err := a.svc.History(ctx, names[0], names[1], status, page)
	return p, nil, err
}

// previewReply lists the executions as RFC 3339 UTC times with whole seconds, the format of
// `schedctl preview` (recurrence.md §10).
type previewReply struct {
	Value []string `json:"value"`
}

func (a *handlers) preview(_ context.Context, _ []string, body []byte) (any, micro.Headers, error) {
	r, err := decodePreview(body)
	if err != nil {
		return nil, nil, err
	}
	times, err := a.svc.Preview(r)
	if err != nil {
		return nil, nil, err
	}
	out := previewReply{Value: make([]string, len(times))}
	for i, t := range times {
		out.Value[i] = t.UTC().Format(time.RFC3339)
	}
	return out, nil, nil
}
