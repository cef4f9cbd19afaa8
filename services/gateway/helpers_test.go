package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
)

// running is a gateway started in the test's process.
type running struct {
	addr   string // the API's
	access string // the access file
	logs   *testenv.LogBuffer
}

// startGateway runs a gateway on free loopback ports, against a NATS server of its own, with an
// access file granting the token "first" everything; env adds or replaces its settings.
func startGateway(t *testing.T, env map[string]string) *running {
	t.Helper()
	r := &running{addr: testenv.FreeAddr(t), access: filepath.Join(t.TempDir(), "access.json"), logs: &testenv.LogBuffer{}}
	writeAccess(t, r.access, "first")
	all := map[string]string{"NATS_URL": natstest.Start(t).ClientURL(), "RESCHED_GATEWAY_ACCESS_FILE": r.access,
		"RESCHED_GATEWAY_ADDR": r.addr, "RESCHED_GATEWAY_HTTP_ADDR": testenv.FreeAddr(t)}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := parseConfig(nil, func(k string) string { return all[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, err := newGateway(ctx, cfg, slog.New(slog.NewTextHandler(r.logs, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- g.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// writeAccess writes an access file granting token everything, dated a second past the
// file's last version, so that a reader looking for a change by the time sees one.
func writeAccess(t *testing.T, path, token string) {
	t.Helper()
	data := `{"tokens": [{"name": "t", "token": "` + token + `", "role": "operator", "scopes": ["*"]}]}`
	testenv.WriteNewer(t, path, []byte(data))
}
