package bus

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
)

// TestWrittenResultsAreReadDirectly: what AppendJSON writes is read without encoding/json.
// Were the direct reader to refuse a layout the worker writes (as it once refused every HTTP
// result, for the "\r\n" of its message), results would still decode, through encoding/json,
// at five times the planner's CPU, and no other test would notice.
func TestWrittenResultsAreReadDirectly(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	base := Result{Collection: "c", Job: "j", Scheduled: at, ExecutionTag: ExecutionTag("c", "j", at), Occurrence: 1,
		ActionName: job.ActionNameMain, StartTime: at, EndTime: at, Status: job.ExecutionCompleted}
	for _, msg := range []string{
		"",
		"Http Action - Response from host '127.0.0.1': 'OK' Response Headers: Content-Length: 2\r\n Body: ok",
		`Body: {"a":"<b> & \\"}`,
		"Body: café 日本\t",
	} {
		r := base
		r.Message = msg
		rs, ok := decodeResultsFast(AppendResultsJSON(nil, []Result{r, r}))
		if !ok || len(rs) != 2 || rs[1] != r {
			t.Errorf("message %q: read directly %v, got %+v", msg, ok, rs)
		}
	}
}

// TestWrittenDueIsReadDirectly: what AppendDue writes is read without encoding/json.
func TestWrittenDueIsReadDirectly(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	for _, action := range []string{`{"type":"Http","request":{"uri":"http://x/é","headers":{"a":"\"b\""}}}`, `null`} {
		want := Due{Collection: "c", Job: "j", Scheduled: at, ExecutionTag: ExecutionTag("c", "j", at), Occurrence: 3, Action: json.RawMessage(action)}
		got, ok := decodeDueFast(AppendDue(nil, "c", "j", at, 3, json.RawMessage(action)))
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("action %s: read directly %v, got %+v", action, ok, got)
		}
	}
}
