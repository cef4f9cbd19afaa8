package setup_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/setup"
)

var errRefused = errors.New("refused")

// The first attempts get Try, later ones twice the one before up to MaxTry; a refused attempt
// waits Delay, doubling up to MaxDelay.
func TestAttemptsGrowFromShortToLong(t *testing.T) {
	var times []time.Duration
	var waits []time.Duration
	p := setup.Pacing{Try: 2 * time.Second, Short: 3, MaxTry: 10 * time.Second, Delay: time.Millisecond, MaxDelay: 4 * time.Millisecond}
	err := setup.Retry(context.Background(), p, func(ctx context.Context) error {
		dl, _ := ctx.Deadline()
		times = append(times, time.Until(dl))
		if len(times) < 7 {
			return errRefused
		}
		return nil
	}, func(err error, wait time.Duration) {
		if !errors.Is(err, errRefused) {
			t.Errorf("failed with %v, want the attempt's error", err)
		}
		waits = append(waits, wait)
	})
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	want := []time.Duration{2, 2, 2, 4, 8, 10, 10}
	if len(times) != len(want) {
		t.Fatalf("%d attempts, want %d", len(times), len(want))
	}
	for i, w := range want {
		if got := times[i]; got > w*time.Second || got < w*time.Second-time.Second {
			t.Errorf("attempt %d had %v, want %v", i+1, got.Round(time.Millisecond), w*time.Second)
		}
	}
	ms := time.Millisecond
	if wantWaits := []time.Duration{ms, 2 * ms, 4 * ms, 4 * ms, 4 * ms, 4 * ms}; !slices.Equal(waits, wantWaits) {
		t.Errorf("waits %v, want %v", waits, wantWaits)
	}
}

// An attempt that waited its whole time is made again at once, and does not grow the delay a
// refusal waits.
func TestUnansweredAttemptIsMadeAgainAtOnce(t *testing.T) {
	var waits []time.Duration
	calls := 0
	p := setup.Pacing{Try: 20 * time.Millisecond, Delay: 5 * time.Millisecond}
	err := setup.Retry(context.Background(), p, func(ctx context.Context) error {
		calls++
		switch calls {
		case 1, 3:
			<-ctx.Done()
			return ctx.Err()
		case 2, 4:
			return errRefused
		}
		return nil
	}, func(_ error, wait time.Duration) { waits = append(waits, wait) })
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	ms := time.Millisecond
	if want := []time.Duration{0, 5 * ms, 0, 10 * ms}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

// An error marked Final ends Retry at once with that error.
func TestFinalErrorEndsAtOnce(t *testing.T) {
	calls := 0
	err := setup.Retry(context.Background(), setup.Pacing{}, func(context.Context) error {
		calls++
		return setup.Final(errRefused)
	}, func(err error, _ time.Duration) { t.Errorf("failed called with %v", err) })
	if !errors.Is(err, errRefused) || calls != 1 {
		t.Errorf("Retry = %v after %d calls, want %v after 1", err, calls, errRefused)
	}
}

// Retry ends with the cause of its context, during an attempt or a wait.
func TestRetryEndsWithItsContext(t *testing.T) {
	stop := errors.New("stopping")
	ctx, cancel := context.WithCancelCause(context.Background())
	err := setup.Retry(ctx, setup.Pacing{Delay: time.Hour}, func(context.Context) error { return errRefused },
		func(error, time.Duration) { cancel(stop) })
	if !errors.Is(err, stop) {
		t.Errorf("Retry = %v while waiting, want %v", err, stop)
	}
	ctx, cancel = context.WithCancelCause(context.Background())
	err = setup.Retry(ctx, setup.Pacing{}, func(context.Context) error { cancel(stop); return errRefused },
		func(err error, _ time.Duration) { t.Errorf("failed called with %v", err) })
	if !errors.Is(err, stop) {
		t.Errorf("Retry = %v during an attempt, want %v", err, stop)
	}
}

// A MaxDelay below Delay (the worker's RetryDelay set above 2 s) never shortens the wait.
func TestDelayIsNeverCutBelowItsFirst(t *testing.T) {
	var waits []time.Duration
	calls := 0
	p := setup.Pacing{Delay: 30 * time.Millisecond, MaxDelay: 10 * time.Millisecond}
	err := setup.Retry(context.Background(), p, func(context.Context) error {
		if calls++; calls <= 3 {
			return errRefused
		}
		return nil
	}, func(_ error, wait time.Duration) { waits = append(waits, wait) })
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	ms := 30 * time.Millisecond
	if want := []time.Duration{ms, ms, ms}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

// A consumer interrupted after it ran longer than the delay is set up again at once; one
// interrupted sooner waits the delay.
func TestAgainWaitsOnlyAfterAShortRun(t *testing.T) {
	for _, tc := range []struct{ ran, want time.Duration }{
		{time.Hour, 0}, {1001 * time.Millisecond, 0}, {time.Second, time.Second}, {0, time.Second},
	} {
		if got := setup.Again(tc.ran, time.Second); got != tc.want {
			t.Errorf("Again(%v, 1s) = %v, want %v", tc.ran, got, tc.want)
		}
	}
}
