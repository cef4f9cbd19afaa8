package jobs

import "testing"

// A patch is stored in place only when it changes the state and nothing else, in either shape
// a patch may take.
func TestStateOnly(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"properties":{"state":"Disabled"}}`:                               true,
		`{"state":"Enabled"}`:                                               true,
		`{"properties":{"state":"Disabled","action":{"type":"Http"}}}`:      false,
		`{"properties":{"state":"Disabled"},"location":"west"}`:             false,
		`{"properties":{"recurrence":{"frequency":"Minute","interval":1}}}`: false,
		`{"state":"Enabled","startTime":"2026-01-01T00:00:00Z"}`:            false,
		`{"properties":{}}`:                                                 false,
		`{}`:                                                                false,
		`not json`:                                                          false,
		`{"properties":"Disabled"}`:                                         false,
	} {
		if got := stateOnly([]byte(raw)); got != want {
			t.Errorf("stateOnly(%s) = %v, want %v", raw, got, want)
		}
	}
}
