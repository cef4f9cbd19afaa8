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
	base := Result{Collection: "c", Job: "j", Scheduled: at, ExecutionTag: ExecutionTag("c", "j", 41, at), Occurrence: 1, Incarnation: 41,
		ActionName: job.ActionNameMain, Attempt: 1, Delivery: 2, StartTime: at, EndTime: at, Status: job.ExecutionCompleted}
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
		for _, inc := range []int64{0, 41} {
			want := Due{Collection: "c", Job: "j", Scheduled: at, ExecutionTag: ExecutionTag("c", "j", inc, at), Occurrence: 3,
				Incarnation: inc, Action: json.RawMessage(action)}
			got, ok := decodeDueFast(AppendDue(nil, "c", "j", inc, at, 3, json.RawMessage(action)))
			if !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("action %s, incarnation %d: read directly %v, got %+v", action, inc, ok, got)
			}
		}
	}
}

// TestWrittenActionsAreReadDirectly: the HTTP actions the planner stores (json.Marshal) are
// read without encoding/json; the others are left to it.
func TestWrittenActionsAreReadDirectly(t *testing.T) {
	count, interval := 2, job.DurationOf(45*time.Second)
	iso, err := job.ParseDuration("PT45S") // written back as ISO 8601, and so read
	if err != nil {
		t.Fatal(err)
	}
	direct := []job.Action{
		{ActionSpec: job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: "http://x/", Method: "GET"}}},
		{ActionSpec: job.ActionSpec{Type: job.ActionHTTPS, Request: &job.HTTPRequest{URI: "https://x/a?b=c&d=<é>", Method: "POST",
			Headers: map[string]string{"Content-Type": "application/json", "X-B": "\"q\"\r\n"}, Body: `{"a":1}`},
			RetryPolicy: &job.RetryPolicy{RetryType: job.RetryFixed, RetryInterval: &interval, RetryCount: &count}}},
		{ActionSpec: job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: "http://x/", Method: "GET"},
			RetryPolicy: &job.RetryPolicy{RetryType: job.RetryNone}}},
		{ActionSpec: job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: "http://x/", Method: "GET"},
			RetryPolicy: &job.RetryPolicy{RetryType: job.RetryFixed, RetryInterval: &iso}}},
		{ActionSpec: job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: "http://x/", Method: "GET"},
			RetryPolicy: &job.RetryPolicy{RetryCount: &count}}},
	}
	for _, a := range direct {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodeActionFast(b)
		if !ok || !reflect.DeepEqual(*got, a) {
			t.Errorf("%s: read directly %v, got %+v", b, ok, got)
		}
	}
	for _, b := range []string{
		`{"type":"Http","request":{"uri":"http://x/","method":"GET","authentication":{"type":"Basic","username":"u","password":"p"}}}`,
		`{"type":"StorageQueue","queueMessage":{"storageAccount":"a","queueName":"q","sasToken":"?sig=s","message":"m"}}`,
		`{"type":"Http","request":{"uri":"http://x/","method":"GET"},"errorAction":{"type":"Http","request":{"uri":"http://y/","method":"GET"}}}`,
	} {
		if _, ok := decodeActionFast([]byte(b)); ok {
			t.Errorf("%s: read directly, though the direct reader knows no such member", b)
		}
	}
}
