package jobs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A change whose check panics (here: a service without its validator, standing for a bug that
// a definition trips) is refused alone, an internal error, with the stack in the log and
// nothing of the definition: the batch's other changes apply, and the intake does not take it
// up again (it stopped the planner reading it, then the next).
func TestAChangeWhoseCheckPanicsIsRefusedAlone(t *testing.T) {
	var logged bytes.Buffer
	s := &Service{log: slog.New(slog.NewTextHandler(&logged, nil))}
	ctx, colls, now := context.Background(), map[string]cachedCollection{}, time.Now()
	_, def, err := s.checked(ctx, Change{Collection: "c", Name: "j", Raw: []byte(`{"secret": "hunter2"}`)}, colls, now)
	var e *Error
	if !errors.As(err, &e) || e.Status != 500 || e.Code != CodeInternal || def != nil ||
		!strings.Contains(e.Message, "internal error") || !strings.Contains(e.Message, "not stored") {
		t.Fatalf("checked: %v (%+v), definition %v; want a 500 InternalError saying it was not stored", err, e, def)
	}
	out := logged.String()
	for _, want := range []string{"level=ERROR", "panic recovered: check of a job definition", "collection=c", "job=j", "stack="} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(e.Error(), "hunter2") {
		t.Errorf("the definition is in the log or the error:\n%s\n%v", out, e)
	}
	if w, _, err := s.checked(ctx, Change{Collection: "c", Name: "k", Delete: true}, colls, now); err != nil || w.Delete == nil {
		t.Errorf("a delete beside it: %+v, %v; want its write", w, err)
	}
}
