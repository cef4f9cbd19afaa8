package dispatch

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
)

// prepareErrors counts the dispatcher's prepare errors.
type prepareErrors struct {
	noMetrics
	n int
}

func (p *prepareErrors) Error(stage string) {
	if stage == "prepare" {
		p.n++
	}
}

// A job whose preparation panics (a bug its definition trips; here a compiled entry without
// its schedule) is parked Faulted with a history entry saying why, as one that no longer
// compiles: a panic would have stopped the planner, and then each planner taking the
// partition over and reading the job again. The job beside it fires as usual.
func TestAJobThatPanicsThePlannerIsParked(t *testing.T) {
	var logged bytes.Buffer
	m := &prepareErrors{}
	pd := &partitionDispatcher{Dispatcher: &Dispatcher{cfg: Config{Logger: slog.New(slog.NewTextHandler(&logged, nil)), Metrics: m}},
		cache: newScheduleCache(10)}
	r := rules{window: time.Hour, burst: 100}

	broken, rec := compiledJob(t, "")
	broken.sched = nil
	rec.State = job.StateEnabled
	pj := pd.prepare(rec, broken, c0, r)
	if pj.move.Park != job.StateFaulted || len(pj.msgs) != 0 || len(pj.move.History) != 1 ||
		!strings.Contains(pj.move.History[0].Message, "the planner failed on this job, so the job is Faulted: an internal error") {
		t.Errorf("the job that panics: park %q, %d messages, history %+v; want it parked Faulted, saying why", pj.move.Park, len(pj.msgs), pj.move.History)
	}
	if m.n != 1 {
		t.Errorf("%d prepare errors counted, want 1", m.n)
	}
	for _, want := range []string{"level=ERROR", "panic recovered: dispatch of a job", "collection=c", "job=j", "nil pointer dereference", "stack="} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logged.String())
		}
	}

	ok, rec := compiledJob(t, "")
	rec.State = job.StateEnabled
	if pj := pd.prepare(rec, ok, c0, r); pj.move.Park != "" || len(pj.msgs) != 1 {
		t.Errorf("the job beside it: park %q, %d messages; want its occurrence", pj.move.Park, len(pj.msgs))
	}
}
