package consumer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// TestAppendResultIsJSONMarshal checks the hand-written encoder against encoding/json.
func TestAppendResultIsJSONMarshal(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	base := bus.Result{
		Collection: "c-1", Job: "j_2", Scheduled: at, ExecutionTag: bus.ExecutionTag("c-1", "j_2", at), Occurrence: 7,
		ActionName: job.ActionNameMain, Attempt: 2, StartTime: at.Add(time.Second), EndTime: at.Add(1500 * time.Millisecond),
		Status: job.ExecutionCompleted,
	}
	tests := []struct {
		name string
		edit func(*bus.Result)
	}{
		{"no message", func(*bus.Result) {}},
		{"plain message", func(r *bus.Result) { r.Message = "Http Action - Response from host 'x': 'OK' Status code: 200" }},
		{"message to escape", func(r *bus.Result) { r.Message = "a \"q\" \\ <b> & \n\t\x01 é \u2028 \xff" }},
		{"failed, final, faulted", func(r *bus.Result) {
			r.Status, r.Final, r.Faulted, r.ActionName = job.ExecutionFailed, true, true, job.ActionNameError
		}},
		{"zone offset", func(r *bus.Result) { r.StartTime = r.StartTime.In(time.FixedZone("x", 5*3600+1800)) }},
		{"zero times", func(r *bus.Result) { r.Scheduled, r.StartTime, r.EndTime = time.Time{}, time.Time{}, time.Time{} }},
		{"year out of range", func(r *bus.Result) { r.EndTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"negative numbers", func(r *bus.Result) { r.Occurrence, r.Attempt = -1, -20 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			tt.edit(&r)
			want, _ := json.Marshal(r)
			if got := appendResult(nil, r); string(got) != string(want) {
				t.Errorf("appendResult\n got %s\nwant %s", got, want)
			}
		})
	}
}
