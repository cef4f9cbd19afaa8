package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
)

// SIGTERM and SIGINT stop the gateway process cleanly (exit 0, a stop record), and its logs
// never show the password of its NATS URL.
func TestSignalStopsGateway(t *testing.T) {
	bin := testenv.Build(t, "gateway")
	access := filepath.Join(t.TempDir(), "access.json")
	writeAccess(t, access, "first")
	natsURL := strings.Replace(natstest.Start(t).ClientURL(), "nats://", "nats://gateway:hunter2@", 1)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(bin, "gateway"), "-log-level", "debug")
			cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "RESCHED_GATEWAY_ACCESS_FILE="+access,
				"RESCHED_GATEWAY_ADDR="+testenv.FreeAddr(t), "RESCHED_GATEWAY_HTTP_ADDR="+testenv.FreeAddr(t))
			testenv.StopsOnSignal(t, cmd, sig, "api listening", "gateway stopped", "hunter2")
		})
	}
}
