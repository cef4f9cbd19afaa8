package pull_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/pull"
)

// A consumer set-up JetStream refuses or never answers at start (the stream's leader being
// elected as the planner starts) is made again; the planner stopped with an error before.
func TestConsumerSetUpFailingAtStartIsMadeAgain(t *testing.T) {
	nc, js, _ := natstest.Start(t).JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	flaky := &failingSetup{JetStream: js, failures: 2}
	var logs testenv.LogBuffer
	got := make(chan string, 1)
	done := make(chan error, 1)
	var up atomic.Bool
	go func() {
		done <- pull.Run(ctx, pull.Config{
			Name: "test", JS: flaky, Stream: "S", RetryDelay: 10 * time.Millisecond,
			Consumer: jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy},
			Logger:   slog.New(slog.NewJSONHandler(&logs, nil)), Consuming: &up,
		}, func(_ context.Context, m jetstream.Msg) {
			_ = m.Ack()
			got <- string(m.Data())
		})
	}()
	if _, err := js.Publish(ctx, "s.x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if up.Load() {
		t.Error("consuming (ready) while the first set-up waits for its answer")
	}
	select {
	case data := <-got:
		if data != "hello" {
			t.Errorf("handled %q, want hello", data)
		}
	case err := <-done:
		t.Fatalf("Run ended before the consumer was set up: %v\n%s", err, logs.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("nothing handled after %d set-up attempts\n%s", flaky.calls.Load(), logs.String())
	}
	if !up.Load() {
		t.Error("not consuming (not ready) once a message was handled")
	}
	if n := flaky.calls.Load(); n != 3 {
		t.Errorf("%d set-up attempts, want 3 (two failed)", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run at its stop: %v", err)
	}
	if up.Load() {
		t.Error("consuming (ready) after Run ended")
	}
	nc.Close()
}

// A closed connection ends Run with an error at once: the planner exits, to be started again.
func TestClosedConnectionEndsRun(t *testing.T) {
	nc, js, _ := natstest.Start(t).JetStream(t)
	nc.Close()
	done := make(chan error, 1)
	go func() {
		done <- pull.Run(context.Background(), pull.Config{
			Name: "test", JS: js, Stream: "S", RetryDelay: 10 * time.Millisecond,
			Consumer: jetstream.ConsumerConfig{Durable: "c"}, Logger: slog.New(slog.DiscardHandler),
		}, func(context.Context, jetstream.Msg) {})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run on a closed connection returned nil")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run on a closed connection still trying after 10 s")
	}
}

// failingSetup is JetStream whose first consumer set-ups fail: the first waits out its
// deadline (unanswered), the others are refused at once.
type failingSetup struct {
	jetstream.JetStream
	failures int32
	calls    atomic.Int32
}

func (f *failingSetup) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	switch n := f.calls.Add(1); {
	case n == 1:
		<-ctx.Done()
		return nil, ctx.Err()
	case n <= f.failures:
		return nil, errors.New("refused")
	}
	return f.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
}

// A consumer interrupted after it had consumed a while (deleted here; its leader handed over
// in a rolling restart of NATS, in production) is set up again at once, not after RetryDelay.
func TestConsumerInterruptedAfterAWhileResumesAtOnce(t *testing.T) {
	nc, js, _ := natstest.Start(t).JetStream(t)
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	got := make(chan string, 2)
	done := make(chan error, 1)
	go func() {
		done <- pull.Run(ctx, pull.Config{
			Name: "test", JS: js, Stream: "S", RetryDelay: time.Microsecond, // less than any consumer runs
			Consumer: jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy},
			Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
		}, func(ctx context.Context, m jetstream.Msg) {
			_ = m.DoubleAck(ctx) // stored, so the work queue holds it no more once deleted
			got <- string(m.Data())
		})
	}()
	handled := func(want string) {
		t.Helper()
		if _, err := js.Publish(ctx, "s.x", []byte(want)); err != nil {
			t.Fatal(err)
		}
		select {
		case data := <-got:
			if data != want {
				t.Errorf("handled %q, want %q", data, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s not handled\n%s", want, logs.String())
		}
	}
	handled("first")
	if err := js.DeleteConsumer(ctx, "S", "c"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the interruption logged", func() bool {
		return strings.Contains(logs.String(), `"msg":"test: interrupted; resuming"`)
	}, logs.String)
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "interrupted; resuming") && !strings.Contains(line, `"retry_in":"0s"`) {
			t.Errorf("resumed after a wait: %s", line)
		}
	}
	handled("second")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run at its stop: %v", err)
	}
}

// A batch whose handling panics is handled again message by message: the others apply at once,
// and the message that trips the bug is handed back alone, later at each delivery (a stack in
// the log each time, not every second for ever).
func TestAMessageThatPanicsIsHandedBackAloneAndLaterEachTime(t *testing.T) {
	nc, js, _ := natstest.Start(t).JetStream(t)
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{"a", "b", "poison", "c", "d"} {
		if _, err := js.Publish(ctx, "s."+data, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	var logs testenv.LogBuffer
	var handled, poisoned atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- pull.RunBatches(ctx, pull.Config{
			Name: "test", JS: js, Stream: "S", RetryDelay: 10 * time.Millisecond, Batch: 8,
			Consumer: jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy},
			Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
		}, func(_ context.Context, msgs []jetstream.Msg) {
			for _, m := range msgs {
				if string(m.Data()) == "poison" {
					poisoned.Add(1)
					panic("a bug")
				}
			}
			for _, m := range msgs {
				_ = m.Ack()
				handled.Add(1)
			}
		})
	}()
	testenv.Eventually(t, 15*time.Second, "the other four handled and the poison tried four times", func() bool {
		return handled.Load() == 4 && poisoned.Load() >= 4
	}, logs.String)
	var waits []string
	stacks := 0
	for _, r := range logs.Records(t) {
		switch r["msg"] {
		case "test: message handed back after a panic":
			waits = append(waits, r["retry_in"].(string))
		case "panic recovered: test message":
			stacks++
		}
	}
	if len(waits) < 3 || waits[0] != "10ms" || waits[1] != "20ms" || waits[2] != "40ms" {
		t.Errorf("the message that panicked came back after %v; want 10ms, 20ms, 40ms…", waits)
	}
	if stacks != len(waits) && stacks != len(waits)+1 { // the last may be logged, not yet handed back
		t.Errorf("%d stacks logged for %d hand-backs; want one for each panic of the message alone:\n%s", stacks, len(waits), logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run at its stop: %v", err)
	}
}
