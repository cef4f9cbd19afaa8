package arm

import (
	"errors"
	"testing"

	"github.com/resched/resched/services/gateway/internal/schedapi"
	"github.com/resched/resched/services/internal/bus"
)

// A field's error names it under properties; an error of the body as a whole names no field
// (it once said "properties.", a field of no name).
func TestPlannerErrorsNameTheFieldUnderProperties(t *testing.T) {
	err := armError(&schedapi.Error{Status: 400, Code: "BadRequest", Message: "the definition is invalid", Details: []bus.ErrorEntry{
		{Path: "recurrence.interval", Message: "must be at least 1"},
		{Path: "", Message: "the job is not valid JSON: the text ends too early"},
	}})
	var a *apiError
	if !errors.As(err, &a) || len(a.Details) != 2 {
		t.Fatalf("armError: %#v", err)
	}
	if got := a.Details[0].Target; got != "properties.recurrence.interval" {
		t.Errorf("a field's target: %q", got)
	}
	if got := a.Details[1].Target; got != "" {
		t.Errorf("the whole body's target: %q, want none", got)
	}
}
