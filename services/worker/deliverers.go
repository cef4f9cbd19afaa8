package main

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/services/worker/internal/action/servicebus"
	"github.com/resched/resched/services/worker/internal/action/storagequeue"
	"github.com/resched/resched/shared/job"
)

// deliverers builds the deliverer of every action type. close releases their connections.
func deliverers(cfg Config) (reg action.Registry, close func(context.Context), err error) {
	deny, err := httpaction.ParseNetworks(cfg.DenyNetworks)
	if err != nil {
		return nil, nil, fmt.Errorf("deny networks: %w", err)
	}
	h := httpaction.New(httpaction.Options{Timeout: cfg.AttemptTimeout, OAuthAuthority: cfg.OAuthAuthority, DenyNetworks: deny,
		RootCAs: cfg.targetCAs})
	sq, err := storagequeue.New(storagequeue.Config{
		Endpoint: cfg.StorageQueueEndpoint, Base64: cfg.StorageQueueBase64, Timeout: cfg.AttemptTimeout, RootCAs: cfg.targetCAs,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage queue deliverer: %w", err)
	}
	sbOptions := servicebus.DefaultClientOptions()
	if cfg.targetCAs != nil {
		sbOptions.TLSConfig = &tls.Config{RootCAs: cfg.targetCAs, MinVersion: tls.VersionTLS12}
	}
	sb, err := servicebus.New(servicebus.Config{
		Endpoint: cfg.ServiceBusEndpoint, DevelopmentEmulator: cfg.ServiceBusEmulator, Timeout: cfg.AttemptTimeout,
		ClientOptions: sbOptions,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("service bus deliverer: %w", err)
	}
	reg = action.Registry{
		job.ActionHTTP:            h,
		job.ActionHTTPS:           h,
		job.ActionStorageQueue:    sq,
		job.ActionServiceBusQueue: sb,
		job.ActionServiceBusTopic: sb,
	}
	return reg, func(ctx context.Context) {
		h.Close()
		_ = sb.Close(ctx)
	}, nil
}
