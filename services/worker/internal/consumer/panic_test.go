package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/worker/internal/consumer"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/shared/job"
)

// A message whose handling panics (a bug its job trips outside the attempt, which the executor
// recovers itself) is ended as a malformed one, the panic logged with its stack; the worker
// goes on with the others.
func TestAPanicEndsItsMessageAlone(t *testing.T) {
	e := newEnv(t)
	res := e.results(t)
	tg := newTarget(t)
	var logs testenv.LogBuffer
	e.loggedWorker(t, &logs, func(c *consumer.Config) { c.Executor = panicking{c.Executor} })
	e.publishDue(t, "c", "boom", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	tag := e.publishDue(t, "c", "ok", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})

	if got := res.take(t, 1); got[0].ExecutionTag != tag || got[0].Status != job.ExecutionCompleted {
		t.Errorf("result %+v, want the other occurrence's", got[0])
	}
	testenv.Eventually(t, deadline, "the message that panicked to be ended", func() bool { return e.dueMessages(t) == 0 })
	var recovered, ended bool
	for _, r := range logs.Records(t) {
		recovered = recovered || r["msg"] == "panic recovered: due message" && strings.Contains(fmt.Sprint(r["stack"]), "panicking.Execute")
		ended = ended || r["msg"] == "malformed due message terminated" && r["subject"] == e.subjects.Due("c", "boom")
	}
	if !recovered || !ended {
		t.Errorf("logged the panic with its stack: %v, the message ended: %v; logs:\n%s", recovered, ended, logs.String())
	}
}

// panicking is an executor that panics for the job named boom.
type panicking struct{ consumer.Executor }

func (p panicking) Execute(ctx context.Context, a executor.Attempt) (executor.Decision, error) {
	if a.Due.Job == "boom" {
		panic("a bug")
	}
	return p.Executor.Execute(ctx, a)
}
