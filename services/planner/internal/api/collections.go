package api

import (
	"context"

	"github.com/nats-io/nats.go/micro"
)

// The collection operations; names[0] is the collection.

func (a *handlers) putCollection(ctx context.Context, names []string, body []byte) (any, micro.Headers, error) {
	c, ok, err := a.svc.PutCollection(ctx, names[0], body)
	if err != nil {
		return nil, nil, err
	}
	return c, created(ok), nil
}

func (a *handlers) getCollection(ctx context.Context, names []string, _ []byte) (any, micro.Headers, error) {
	c, err := a.svc.GetCollection(ctx, names[0])
	return c, nil, err
}

func (a *handlers) deleteCollection(ctx context.Context, names []string, _ []byte) (any, micro.Headers, error) {
	return empty{}, nil, a.svc.DeleteCollection(ctx, names[0])
}

func (a *handlers) listCollections(ctx context.Context, _ []string, body []byte) (any, micro.Headers, error) {
	page, err := decodePage(body)
	if err != nil {
		return nil, nil, err
	}
	p, err := a.svc.ListCollections(ctx, page)
	return p, nil, err
}

func (a *handlers) enableCollection(ctx context.Context, names []string, _ []byte) (any, micro.Headers, error) {
	c, err := a.svc.EnableCollection(ctx, names[0])
	return c, nil, err
}

func (a *handlers) disableCollection(ctx context.Context, names []string, _ []byte) (any, micro.Headers, error) {
	c, err := a.svc.DisableCollection(ctx, names[0])
	return c, nil, err
}
