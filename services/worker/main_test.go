package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/resched/resched/services/internal/testenv"
)

// runAsWorker makes the test binary act as the worker when a test starts it as a child, so
// tests can send real signals to a real process.
const runAsWorker = "RESCHED_WORKER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsWorker) == "1" {
		os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// unreachableNATS is a NATS URL where nothing listens: the worker keeps trying to connect.
const unreachableNATS = "nats://127.0.0.1:1"

func TestServeStopsWhenContextIsCanceled(t *testing.T) {
	var out testenv.LogBuffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	cfg := defaultConfig()
	cfg.NATS.URL, cfg.HTTPAddr = unreachableNATS, "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, logger) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	recs := out.Records(t)
	var msgs []string
	for _, r := range recs {
		msgs = append(msgs, r["msg"].(string))
	}
	got := strings.Join(msgs, "|")
	if !strings.HasPrefix(got, "worker started|") || !strings.Contains(got, "|worker stopping|") || !strings.HasSuffix(got, "|worker stopped") {
		t.Errorf("log messages %q: want worker started, …, worker stopping, …, worker stopped", got)
	}
	c, ok := recs[0]["config"].(map[string]any)
	nats, _ := c["nats"].(map[string]any)
	if !ok || nats["url"] != unreachableNATS || c["concurrency"] != 16.0 || c["log_level"] != "INFO" || recs[0]["version"] == nil {
		t.Errorf("start record does not carry the config: %v", recs[0])
	}
}

func TestSignalStopsWorker(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-log-level", "debug")
			cmd.Env = append(os.Environ(), runAsWorker+"=1", "NATS_URL=nats://u:hunter2@127.0.0.1:1",
				"RESCHED_WORKER_HTTP_ADDR=127.0.0.1:0")
			testenv.StopsOnSignal(t, cmd, sig, "worker started", "worker stopped", "hunter2")
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"-h"}, 0},
		{"bad flag", []string{"-nope"}, 2},
		{"bad value", []string{"-log-level", "loud"}, 2},
		{"bad listen address", []string{"-http-addr", "bad:port:x"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if got := run(tt.args, env(nil), &stdout, &stderr); got != tt.want {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tt.args, got, tt.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("run(%q) logged before the config was valid: %s", tt.args, stdout.String())
			}
		})
	}
}
