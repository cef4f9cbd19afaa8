package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/gateway/internal/arm"
	"github.com/resched/resched/services/gateway/internal/dashboard"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/certfile"
	"github.com/resched/resched/services/internal/health"
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/services/internal/reload"
	"github.com/resched/resched/services/internal/version"
)

// gateway is the running service: the API listener, the health listener, the NATS connection.
type gateway struct {
	board  *dashboard.Server
	cfg    Config
	log    *slog.Logger
	conn   *natsconn.Conn
	api    *http.Server
	apiLn  net.Listener
	health *health.Server
}

// newGateway connects to NATS (which need not be up yet), reaches the OIDC issuer when one is
// set, and binds both addresses, so a port in use fails the start at once.
func newGateway(ctx context.Context, cfg Config, logger *slog.Logger) (*gateway, error) {
	// Read again when it changes: a token revoked, or a grant changed, takes effect at the
	// next request, on every gateway, without a restart.
	file, err := reload.New(func() (*access.File, error) { return access.Load(cfg.AccessFile) },
		reload.Logged(logger, "the access file"), cfg.AccessFile)
	if err != nil {
		return nil, err
	}
	auth, err := access.New(ctx, file.Get, access.OIDC{Issuer: cfg.OIDCIssuer, Audience: cfg.OIDCAudience})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	g := &gateway{cfg: cfg, log: logger}
	if g.conn, err = natsconn.Connect(cfg.NATS, "resched-gateway", logger); err != nil {
		return nil, err
	}
	subjects := bus.NewSubjects(cfg.SubjectPrefix)
	rest, err := arm.New(arm.Config{NATS: g.conn, Subjects: subjects, Auth: auth, Logger: logger,
		PublicURL: cfg.PublicURL, Timeout: cfg.RequestTimeout, Metrics: reg})
	if err != nil {
		g.conn.Close()
		return nil, err
	}
	board, err := dashboard.New(dashboard.Config{NATS: g.conn.Conn, Requests: g.conn, Subjects: subjects,
		JetStreamAPI: cfg.NATS.JetStreamAPI(), Auth: auth, Logger: logger, Timeout: cfg.RequestTimeout})
	if err != nil {
		g.conn.Close()
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	g.board = board
	handler := http.NewServeMux()
	handler.Handle("/dashboard", board)
	handler.Handle("/dashboard/", board)
	handler.Handle("/", rest)
	g.api = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	if g.apiLn, err = net.Listen("tcp", cfg.Addr); err != nil {
		g.conn.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if cfg.TLSCert != "" {
		// Read again when its files change: a renewed certificate is served from the next
		// handshake on, rather than the old one until it expires.
		pair, err := certfile.Load(cfg.TLSCert, cfg.TLSKey, reload.Logged(logger, "the TLS certificate"))
		if err != nil {
			g.close()
			return nil, fmt.Errorf("TLS certificate: %w", err)
		}
		g.apiLn = tls.NewListener(g.apiLn, &tls.Config{GetCertificate: pair.GetCertificate, MinVersion: tls.VersionTLS12})
	}
	g.health, err = health.Listen(cfg.HTTPAddr, health.Handler(health.Config{Gatherer: reg, Logger: logger, Version: version.String(), Profiling: cfg.Profiling,
		Live: []health.Check{{Name: "nats", Func: g.conn.Live}}, Ready: []health.Check{{Name: "nats", Func: g.conn.Ready}}}))
	if err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *gateway) close() {
	if g.board != nil {
		g.board.Close()
	}
	_ = g.apiLn.Close()
	g.conn.Close()
}

// run serves until ctx ends or a listener fails, then stops: no new requests, those in flight
// finish within the shutdown timeout, NATS drains.
func (g *gateway) run(ctx context.Context) error {
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	go func() {
		if err := g.health.Serve(); err != nil {
			fail(err)
		}
	}()
	go func() {
		if err := g.api.Serve(g.apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fail(err)
		}
	}()
	scheme := "http"
	if g.cfg.TLSCert != "" {
		scheme = "https"
	}
	g.log.Info("api listening", "addr", g.apiLn.Addr().String(), "scheme", scheme)
	g.log.Info("http listening", "addr", g.health.Addr().String())
	<-runCtx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer cancel()
	err := errors.Join(g.api.Shutdown(sctx), g.health.Shutdown(sctx))
	g.board.Close()
	_ = g.conn.Drain()
	if cause := context.Cause(runCtx); ctx.Err() == nil {
		return errors.Join(cause, err)
	}
	return err
}
