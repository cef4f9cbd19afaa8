package api

import (
	"context"

	"github.com/nats-io/nats.go/micro"
)

// The collection operations; r.names[0] is the collection.

func (a *handlers) putCollection(ctx context.Context, r request) (any, micro.Headers, error) {
	c, ok, err := a.svc.PutCollection(ctx, r.names[0], r.body, createOnly(r.headers))
	if err != nil {
		return nil, nil, err
	}
	return c, created(ok), nil
}

func (a *handlers) getCollection(ctx context.Context, r request) (any, micro.Headers, error) {
	c, err := a.svc.GetCollection(ctx, r.names[0])
	return c, nil, err
}

func (a *handlers) deleteCollection(ctx context.Context, r request) (any, micro.Headers, error) {
	return empty{}, nil, a.svc.DeleteCollection(ctx, r.names[0])
}

func (a *handlers) listCollections(ctx context.Context, r request) (any, micro.Headers, error) {
	page, err := decodePage(r.body)
	if err != nil {
		return nil, nil, err
	}
	p, err := a.svc.ListCollections(ctx, page)
	return p, nil, err
}

func (a *handlers) enableCollection(ctx context.Context, r request) (any, micro.Headers, error) {
	c, err := a.svc.EnableCollection(ctx, r.names[0])
	return c, nil, err
}

func (a *handlers) disableCollection(ctx context.Context, r request) (any, micro.Headers, error) {
	c, err := a.svc.DisableCollection(ctx, r.names[0])
	return c, nil, err
}
