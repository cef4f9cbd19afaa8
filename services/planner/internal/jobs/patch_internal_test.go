package jobs

import (
	"encoding/json"
	"testing"
)

// A patch is stored in place only when the definition it leaves is the stored one but for its
// state: the state alone, or the whole definition as read (without its secrets, which the
// merge keeps), in either shape a patch may take.
func TestSameButState(t *testing.T) {
	const stored = `{"startTime":"2026-01-01T00:00:00Z","action":{"type":"Http","request":{"method":"GET",
		"uri":"https://example.com/x","headers":{"x-api-key":"secret"}}},"recurrence":{"frequency":"Minute","interval":1}}`
	for patch, want := range map[string]bool{
		`{"properties":{"state":"Disabled"}}`: true,
		`{"state":"Enabled"}`:                 true,
		`{"id":"/subscriptions/s/x","name":"j","properties":{"state":"Disabled","status":{"executionCount":3},
			"startTime":"2026-01-01T00:00:00Z","action":{"type":"Http","request":{"method":"GET","uri":"https://example.com/x"}},
			"recurrence":{"frequency":"Minute","interval":1}}}`: true,
		`{"properties":{"state":"Disabled","recurrence":{"interval":2}}}`:         false,
		`{"properties":{"action":{"request":{"headers":{"x-api-key":"other"}}}}}`: false,
		`{"properties":{"action":{"request":{"headers":null}}}}`:                  false,
		`{"properties":{"endTime":"2027-01-01T00:00:00Z"}}`:                       false,
		`{"properties":{}}`: true, // nothing changes: in place too
	} {
		var before, base, p map[string]any
		if err := json.Unmarshal([]byte(stored), &before); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(stored), &base)
		base["state"] = "Enabled"
		if err := json.Unmarshal([]byte(patch), &p); err != nil {
			t.Fatalf("%s: %v", patch, err)
		}
		if inner, ok := p["properties"].(map[string]any); ok {
			p = inner
		}
		if got := sameButState(before, merge(base, p)); got != want {
			t.Errorf("patch %s: in place %v, want %v", patch, got, want)
		}
	}
}
