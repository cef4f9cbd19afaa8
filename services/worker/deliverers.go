package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

	"github.com/resched/resched/services/internal/reload"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/services/worker/internal/action/servicebus"
	"github.com/resched/resched/services/worker/internal/action/storagequeue"
	"github.com/resched/resched/shared/job"
)

// deliverers builds the deliverer of every action type. With a target CA file they are built
// again when the file changes (targetTrust). close releases their connections.
func deliverers(cfg Config, logger *slog.Logger) (d action.Deliverer, close func(context.Context), err error) {
	if cfg.TargetCA == "" {
		return registry(cfg, nil)
	}
	cas, err := reload.New(func() (*x509.CertPool, error) { return targetCAs(cfg.TargetCA) },
		reload.Logged(logger, "the target CA file"), cfg.TargetCA)
	if err != nil {
		return nil, nil, fmt.Errorf("target CA: %w", err)
	}
	t, err := newTargetTrust(cas, func(pool *x509.CertPool) (action.Registry, func(context.Context), error) {
		return registry(cfg, pool)
	}, cfg.AttemptTimeout, time.Now, logger)
	if err != nil {
		return nil, nil, err
	}
	return t, t.close, nil
}

// registry builds the deliverers trusting rootCAs for targets (nil: the system's CAs).
func registry(cfg Config, rootCAs *x509.CertPool) (reg action.Registry, close func(context.Context), err error) {
	deny, err := httpaction.ParseNetworks(cfg.DenyNetworks)
	if err != nil {
		return nil, nil, fmt.Errorf("deny networks: %w", err)
	}
	h := httpaction.New(httpaction.Options{Timeout: cfg.AttemptTimeout, OAuthAuthority: cfg.OAuthAuthority, DenyNetworks: deny,
		RootCAs: rootCAs})
	sq, err := storagequeue.New(storagequeue.Config{
		Endpoint: cfg.StorageQueueEndpoint, Base64: cfg.StorageQueueBase64, Timeout: cfg.AttemptTimeout, RootCAs: rootCAs,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage queue deliverer: %w", err)
	}
	sbOptions := servicebus.DefaultClientOptions()
	if rootCAs != nil {
		sbOptions.TLSConfig = &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}
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
