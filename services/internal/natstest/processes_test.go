package natstest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/natstest"
)

// LameDuck stops a server the way the scale-out manifests' pods stop (the preStop's lame duck
// signal through the pid file, then SIGTERM): the server goes through lame duck mode, ignoring
// the SIGTERM. A server sent SIGTERM alone, as a pod without the preStop, stops without it.
func TestLameDuckGoesThroughLameDuckModeWhereSIGTERMAloneDoesNot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nats-server processes")
	}
	c := natstest.StartProcessCluster(t, 3)
	if took, lameDuck := c.LameDuck(0, time.Minute); !lameDuck {
		t.Errorf("the server stopped %v after the preStop's signal and SIGTERM without entering lame duck mode", took)
	}
	c.Servers[1].Stop(t, time.Minute)
	log, err := os.ReadFile(c.Servers[1].Log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "Entering lame duck mode") {
		t.Error("a server sent SIGTERM alone entered lame duck mode")
	}
}
