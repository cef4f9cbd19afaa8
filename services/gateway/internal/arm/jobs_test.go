package arm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/resched/resched/shared/jobschema"
)

// TestAMonthlyOccurrenceCountIsAnsweredUnderBothSpellings: "occurrence" as the service
// answered, "Occurrence" as the swagger (and the clients generated from it) reads; a job
// without a count is written as the planners wrote it.
func TestAMonthlyOccurrenceCountIsAnsweredUnderBothSpellings(t *testing.T) {
	decode := func(body string) armJob {
		d, err := jobschema.Decode([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return armJob{*d}
	}
	last := decode(`{"action": {"type": "Http", "request": {"uri": "http://x/", "method": "GET"}},
		"recurrence": {"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Friday", "Occurrence": -1}, {"day": "Monday"}]}}}`)
	b, err := json.Marshal(last)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Properties struct {
			Recurrence struct {
				Schedule struct {
					MonthlyOccurrences []map[string]any `json:"monthlyOccurrences"`
				} `json:"schedule"`
			} `json:"recurrence"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	occ := got.Properties.Recurrence.Schedule.MonthlyOccurrences
	if len(occ) != 2 || occ[0]["occurrence"] != -1.0 || occ[0]["Occurrence"] != -1.0 || occ[0]["day"] != "Friday" {
		t.Errorf("the last Friday answered as %v", occ)
	}
	if len(occ) == 2 && (occ[1]["occurrence"] != nil || occ[1]["Occurrence"] != nil) {
		t.Errorf("every Monday answered as %v", occ[1])
	}
	if !strings.Contains(string(b), `"uri":"http://x/"`) {
		t.Errorf("the rest of the job: %s", b)
	}

	plain := decode(`{"action": {"type": "Http", "request": {"uri": "http://x/?a=1&b=<2>", "method": "GET"}},
		"recurrence": {"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Monday"}]}}}`)
	b, err = json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal(plain.Definition); string(b) != string(want) {
		t.Errorf("a job without a count was written again:\n%s\nwant\n%s", b, want)
	}
}
