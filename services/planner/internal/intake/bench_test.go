package intake_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/startup"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/intake"
)

// TestMain runs the tests and benchmarks with the garbage collector set as bin/planner sets it.
func TestMain(m *testing.M) {
	startup.SetGCPercent(os.Getenv)
	os.Exit(m.Run())
}

// benchDefinitions is how many definitions each intake benchmark applies.
const benchDefinitions = 50_000

// BenchmarkIntake publishes definitions to the intake stream (before timing: a client's part)
// and measures how fast 1 and 2 planners' intakes apply them: validated, stored in Redis,
// acknowledged. The two planners share this machine's two cores, as two planner processes
// would. Run with -benchtime=1x.
func BenchmarkIntake(b *testing.B) {
	for _, planners := range []int{1, 2} {
		b.Run(fmt.Sprintf("planners=%d", planners), func(b *testing.B) {
			for range b.N {
				e := newEnv(b)
				js, err := jetstream.New(e.nc)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				for i := range benchDefinitions {
					if _, err := js.PublishAsync(fmt.Sprintf("scheduler.jobs.c.j%d", i), []byte(definition)); err != nil {
						b.Fatal(err)
					}
				}
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(time.Minute):
					b.Fatal("publishing did not complete")
				}
				rdb := e.redis.Client(b)
				cpu := redistest.CPU(b, rdb)
				procCPU := testenv.ProcessCPU(b)
				start := time.Now()
				for range planners {
					in := intake.New(intake.Config{JS: e.js, Jobs: e.svc, Subjects: subjects, Logger: slog.New(slog.DiscardHandler)})
					runCtx, cancel := context.WithCancel(ctx)
					done := make(chan error, 1)
					go func() { done <- in.Run(runCtx) }()
					b.Cleanup(func() { cancel(); <-done })
				}
				testenv.Eventually(b, 10*time.Minute, "every definition applied", func() bool { return e.pending(b) == 0 })
				took := time.Since(start)
				b.ReportMetric(float64(benchDefinitions)/took.Seconds(), "definitions/s")
				b.ReportMetric(float64((redistest.CPU(b, rdb)-cpu).Microseconds())/benchDefinitions, "redis-µs/definition")
				b.ReportMetric(float64((testenv.ProcessCPU(b)-procCPU).Microseconds())/benchDefinitions, "process-µs/definition")
			}
		})
	}
}
