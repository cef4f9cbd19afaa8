// Package setup makes the requests a service needs answered before it can work (its JetStream
// streams and consumers, the data layout in Redis) until they succeed. NATS or Redis may be down
// at start, JetStream up without a leader for the stream, and a request JetStream receives while
// it elects a leader is never answered at all: an attempt that waits for that answer as long as
// for a slow one leaves the service idle long after JetStream is back (a worker waited 10 s an
// attempt in TestNATSClusterServerCutOff, occurrences 11 s late). So the first attempts are
// short and later ones longer, an attempt that waited its whole time is made again at once, and
// one refused at once waits a growing delay, so that a server refusing does not get a request
// each millisecond.
package setup

import (
	"context"
	"errors"
	"time"
)

// Pacing says how long attempts may wait for their answer and how long to wait between them.
// The zero value is the default of each field.
type Pacing struct {
	Try      time.Duration // each of the first Short attempts' time; default 2 s
	Short    int           // attempts with Try before they double; default 3
	MaxTry   time.Duration // the longest an attempt waits for its answer; default 10 s
	Delay    time.Duration // the first wait after a refusal; default 100 ms
	MaxDelay time.Duration // the wait doubles after each refusal up to this; default 2 s, at least Delay
}

func (p Pacing) withDefaults() Pacing {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&p.Try, 2*time.Second)
	set(&p.MaxTry, 10*time.Second)
	set(&p.Delay, 100*time.Millisecond)
	set(&p.MaxDelay, 2*time.Second)
	if p.Short <= 0 {
		p.Short = 3
	}
	p.Try = min(p.Try, p.MaxTry)
	p.MaxDelay = max(p.MaxDelay, p.Delay)
	return p
}

// finalError marks an error no later attempt can mend.
type finalError struct{ err error }

func (f finalError) Error() string { return f.err.Error() }
func (f finalError) Unwrap() error { return f.err }

// Final marks err as one that ends Retry at once (a configuration that cannot work, a
// connection closed for good): Retry returns err.
func Final(err error) error { return finalError{err} }

// Retry calls do, each time with a context bounded by the attempt's time, until it returns nil
// (Retry returns nil), an error made by Final (Retry returns the error it marks), or ctx ends
// (Retry returns the cause of ctx). Each other failure goes to failed with the wait before the
// next attempt, for the service to log and count.
func Retry(ctx context.Context, p Pacing, do func(context.Context) error, failed func(err error, wait time.Duration)) error {
	p = p.withDefaults()
	try, delay := p.Try, p.Delay
	for n := 1; ; n++ {
		err, unanswered := attempt(ctx, try, do)
		if err == nil {
			return nil
		}
		if final, ok := errors.AsType[finalError](err); ok {
			return final.err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		wait := delay
		if unanswered {
			wait = 0 // the attempt has waited already
		}
		failed(err, wait)
		if !Wait(ctx, wait) {
			return context.Cause(ctx)
		}
		if !unanswered {
			delay = min(2*delay, p.MaxDelay)
		}
		if n >= p.Short {
			try = min(2*try, p.MaxTry)
		}
	}
}

// attempt runs do within try; unanswered when its time ran out (ctx itself still running).
func attempt(ctx context.Context, try time.Duration, do func(context.Context) error) (error, bool) {
	actx, cancel := context.WithTimeout(ctx, try)
	defer cancel()
	err := do(actx)
	return err, err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
}

// Again is the wait before a consumer that was interrupted, after it had run for ran, is set up
// again: none once it had run longer than delay (what interrupted it has passed: its leader
// handed over in a rolling restart of NATS, a server lost), delay when it was interrupted
// sooner, so that a consumer that keeps failing is not set up again in a loop.
func Again(ran, delay time.Duration) time.Duration {
	if ran > delay {
		return 0
	}
	return delay
}

// Wait waits d; false when ctx ended first.
func Wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
