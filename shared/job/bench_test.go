package job

import (
	"encoding/json"
	"testing"
)

// BenchmarkMarshalDefinition is the encoding of a job as the API replies it (and, its schedule
// part, as the planner stores it): an hourly HTTP job with Basic authentication and its status.
func BenchmarkMarshalDefinition(b *testing.B) {
	raw := `{"properties": {"startTime": "2024-01-02T00:00:00Z",
  "action": {"type": "Https", "request": {"uri": "https://example.com/hook", "method": "POST",
    "authentication": {"type": "Basic", "username": "u", "password": "s3cret-pass"}}},
  "recurrence": {"frequency": "Hour", "interval": 1}, "state": "Enabled",
  "status": {"executionCount": 0, "nextExecutionTime": "2024-01-02T00:00:00Z"}}}`
	var d Definition
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(&d); err != nil {
			b.Fatal(err)
		}
	}
}
