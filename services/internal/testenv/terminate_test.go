package testenv_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
)

func TestTerminate(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		killed       bool
	}{
		{"stops on SIGTERM", "exec sleep 60", false}, // exec: no shell left between the signal and sleep
		{"ignores SIGTERM", `trap "" TERM; echo ready; while :; do sleep 0.1; done`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tc.killed { // the trap must be set before the signal comes
				if _, err := out.Read(make([]byte, 6)); err != nil {
					t.Fatal(err)
				}
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			if got := testenv.Terminate(cmd.Process, exited, time.Second); got != tc.killed {
				t.Errorf("Terminate reported killed %v, want %v", got, tc.killed)
			}
			select {
			case <-exited:
			default:
				t.Error("Terminate returned before the process exited")
			}
		})
	}
}
