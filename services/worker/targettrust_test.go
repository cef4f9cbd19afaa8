package main

import (
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/reload"
	"github.com/resched/resched/services/internal/tlstest"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// poolDeliverer records the pool of CAs it was built with.
type poolDeliverer struct{ pool *x509.CertPool }

func (d poolDeliverer) Deliver(context.Context, *job.ActionSpec, action.Meta) (string, error) {
	return "", nil
}

// The deliverers are built again for the CAs the file holds once it changes, looked at no
// more than once a second; those replaced are closed after an attempt's time-out, and a file
// that cannot be read keeps the CAs read before.
func TestTargetTrustBuildsAgainWhenTheCAFileChanges(t *testing.T) {
	first, second := tlstest.NewCA(t, "first"), tlstest.NewCA(t, "second")
	file := filepath.Join(t.TempDir(), "cas.pem")
	write := func(src string, at time.Time) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, at, at); err != nil { // a change even when the sizes match
			t.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(first.CertFile, start)
	cas, err := reload.New(func() (*x509.CertPool, error) { return targetCAs(file) }, nil, file)
	if err != nil {
		t.Fatal(err)
	}
	var built []*x509.CertPool
	closed := 0
	build := func(p *x509.CertPool) (action.Registry, func(context.Context), error) {
		built = append(built, p)
		return action.Registry{job.ActionHTTPS: poolDeliverer{p}}, func(context.Context) { closed++ }, nil
	}
	now := start
	tr, err := newTargetTrust(cas, build, time.Minute, func() time.Time { return now }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var graces []time.Duration
	tr.later = func(d time.Duration, f func()) { graces = append(graces, d); f() }
	deliver := func() *x509.CertPool {
		t.Helper()
		if _, err := tr.Deliver(context.Background(), &job.ActionSpec{Type: job.ActionHTTPS}, action.Meta{}); err != nil {
			t.Fatal(err)
		}
		return tr.cur.Load().reg[job.ActionHTTPS].(poolDeliverer).pool
	}
	if deliver() != built[0] || len(built) != 1 {
		t.Fatalf("built %d times at start", len(built))
	}

	write(second.CertFile, start.Add(time.Minute))
	now = now.Add(500 * time.Millisecond)
	if deliver() != built[0] || len(built) != 1 {
		t.Fatal("the file was looked at again within a second")
	}
	now = now.Add(600 * time.Millisecond)
	if p := deliver(); len(built) != 2 || p != built[1] {
		t.Fatalf("after a second: built %d times, delivering with the new pool %v", len(built), p == built[len(built)-1])
	}
	if closed != 1 || len(graces) != 1 || graces[0] != time.Minute+5*time.Second {
		t.Errorf("the deliverers replaced: closed %d times after %v, want once after the time-out and 5 s", closed, graces)
	}
	if built[1].Equal(built[0]) {
		t.Error("the pool built again holds the same CAs")
	}

	// Unreadable (half written): the CAs read before stay.
	if err := os.WriteFile(file, []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if deliver() != built[1] || len(built) != 2 {
		t.Error("a CA file that cannot be read replaced the CAs")
	}
	// Nothing changed: nothing built.
	now = now.Add(2 * time.Second)
	deliver()
	if len(built) != 2 {
		t.Errorf("built %d times without a change", len(built))
	}
}
