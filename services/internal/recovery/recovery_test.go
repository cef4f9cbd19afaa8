package recovery_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/recovery"
)

func TestCallReturnsWhatFReturns(t *testing.T) {
	errF := errors.New("refused")
	v, err := recovery.Call(func() (int, error) { return 7, errF })
	if v != 7 || err != errF {
		t.Errorf("Call = %d, %v; want 7, %v", v, err, errF)
	}
}

func TestAPanicIsAnErrorWithoutItsValue(t *testing.T) {
	secret := "hunter2-from-the-definition"
	v, err := recovery.Call(func() (string, error) {
		panic("cannot use " + secret)
	})
	var p *recovery.Panic
	if !errors.As(err, &p) || v != "" {
		t.Fatalf("Call = %q, %v; want \"\" and a *Panic", v, err)
	}
	if !strings.Contains(err.Error(), "internal error") || strings.Contains(err.Error(), secret) {
		t.Errorf("error %q: want an internal error, without the panic's value", err)
	}
	var logged bytes.Buffer
	p.Log(slog.New(slog.NewTextHandler(&logged, nil)), "delivery", "job", "c/j")
	out := logged.String()
	for _, want := range []string{"level=ERROR", "panic recovered: delivery", "job=c/j", "a value of type string", "recovery_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Errorf("the log has the panic's value:\n%s", out)
	}
}

func TestARuntimeErrorIsLoggedInFull(t *testing.T) {
	_, err := recovery.Call(func() (int, error) {
		var m map[string]int
		m["x"] = 1 // a nil map: a runtime error
		return 0, nil
	})
	var p *recovery.Panic
	if !errors.As(err, &p) {
		t.Fatalf("Call: %v, want a *Panic", err)
	}
	var logged bytes.Buffer
	p.Log(slog.New(slog.NewTextHandler(&logged, nil)), "request")
	if !strings.Contains(logged.String(), "assignment to entry in nil map") {
		t.Errorf("the runtime error is not in the log:\n%s", logged.String())
	}
}
