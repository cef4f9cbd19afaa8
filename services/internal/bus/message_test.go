package bus_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// AppendDue writes by hand what json.Marshal would write for a Due.
func TestDueSizeFitsTheLongestMessage(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 999_999_999, time.FixedZone("x", 3600))
	for _, action := range []json.RawMessage{nil, json.RawMessage(`{"type":"Http"}`)} {
		if b := bus.AppendDue(nil, "c", "j", math.MinInt64, at, math.MinInt, action); len(b) > bus.DueSize("c", "j", action) {
			t.Errorf("AppendDue wrote %d bytes, DueSize said %d", len(b), bus.DueSize("c", "j", action))
		}
	}
}

func TestAppendDueMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	action := json.RawMessage(`{"type":"Http","request":{"uri":"http://x/\u00e9","method":"GET"}}`)
	var got, want bus.Due
	if err := json.Unmarshal(bus.AppendDue(nil, "c-1", "job_2", 12, at, 7, action), &got); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	b, _ := json.Marshal(bus.Due{Collection: "c-1", Job: "job_2", Scheduled: at, ExecutionTag: bus.ExecutionTag("c-1", "job_2", 12, at), Occurrence: 7, Incarnation: 12, Action: action})
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AppendDue decoded to\n%+v\nwant\n%+v", got, want)
	}
}

func TestAppendEventWritesWhatMarshalWrites(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 5_000_000, time.UTC)
	next := at.Add(time.Hour)
	for _, e := range []bus.Event{
		{Kind: bus.EventAccepted, Collection: "c", Job: "j", Time: at, NextExecutionTime: &next},
		{Kind: bus.EventDeleted, Collection: "c-1", Job: "j_2", Time: at},
		{Kind: bus.EventAccepted, Collection: "c", Job: "j", Time: at, NextExecutionTime: &next, IntakeSequence: 18446744073709551615},
		{Kind: bus.EventDeleted, Collection: "c", Job: "j", Time: at, IntakeSequence: 7},
		{Kind: bus.EventDeleted, Collection: "c", Job: "j", Time: at, IntakeSequence: 8, NotFound: true},
		{Kind: bus.EventRejected, Collection: "c", Job: "j", Time: at, Errors: []bus.ErrorEntry{{Path: "a", Message: "b \"quoted\""}}},
		{Kind: bus.EventDeferred, Collection: "c", Job: "j", Time: at, IntakeSequence: 9, Reason: "Redis is out of memory (its \"maxmemory\")"},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := bus.AppendEvent(nil, e); string(got) != string(want) {
			t.Errorf("AppendEvent:\n got %s\nwant %s", got, want)
		}
	}
}

func dueInputs() map[string]string {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	action := `{"type":"Http","request":{"uri":"http://x/\u00e9","method":"POST","body":"x"},"retryPolicy":{"retryType":"None"}}`
	written := string(bus.AppendDue(nil, "c-1", "job_2", 0, at, 7, json.RawMessage(action)))
	replace := func(old, new string) string { return strings.Replace(written, old, new, 1) }
	return map[string]string{
		"written":                      written,
		"no action":                    string(bus.AppendDue(nil, "c", "j", 0, at, 1, nil)),
		"incarnation":                  string(bus.AppendDue(nil, "c", "j", 77, at, 1, nil)),
		"incarnation a float":          replace(`"occurrence":7`, `"occurrence":7,"incarnation":7.5`),
		"action a string":              replace(action, `"x"`),
		"white space before action":    replace(`"action":{`, `"action": {`),
		"white space after action":     replace(`"None"}}}`, `"None"}} }`),
		"trailing white space":         written + " ",
		"action not JSON":              replace(action, `{"type":`),
		"action and more":              replace(action, action+`,"collection":"other"`),
		"action with a brace too many": replace(action, action+"}"),
		"keys reordered":               `{"job":"j","collection":"c","action":{},"occurrence":1}`,
		"escaped job":                  replace(`"job_2"`, `"job\u005f2"`),
		"not UTF-8 before an escape":   replace(`"job_2"`, "\"job\xff\\u005f2\""),
		"occurrence a float":           replace(`"occurrence":7`, `"occurrence":7.5`),
		"bad time":                     replace(`T12:00:00`, ` 12:00:00`),
		"truncated":                    written[:len(written)-1],
		"empty":                        "",
	}
}

// TestDecodeDueIsJSONUnmarshal: what AppendDue writes and what other writers may, read as
// encoding/json reads it.
func TestDecodeDueIsJSONUnmarshal(t *testing.T) {
	for name, in := range dueInputs() {
		checkDecodeDue(t, name, []byte(in))
	}
}

// FuzzDecodeDue: whatever the input, DecodeDue agrees with json.Unmarshal.
func FuzzDecodeDue(f *testing.F) {
	for _, in := range dueInputs() {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeDue(t, "fuzz", data) })
}

func checkDecodeDue(t *testing.T, name string, data []byte) {
	t.Helper()
	var want bus.Due
	wantErr := json.Unmarshal(data, &want)
	got, err := bus.DecodeDue(data)
	if (err != nil) != (wantErr != nil) {
		t.Errorf("%s: DecodeDue error %v, json.Unmarshal %v", name, err, wantErr)
		return
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("%s: DecodeDue\n got %+v\nwant %+v", name, got, want)
	}
}

func BenchmarkDecodeDue(b *testing.B) {
	data := []byte(dueInputs()["written"])
	b.Run("DecodeDue", func(b *testing.B) {
		for b.Loop() {
			if _, err := bus.DecodeDue(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var d bus.Due
			if err := json.Unmarshal(data, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A result's id names its delivery: the attempt's number, and the delivery count too when a
// delivery past the retry policy runs the last attempt again, so that two deliveries never
// share one (the planner records each once, and takes a result with a known id for a copy).
func TestResultMsgIDNamesTheDelivery(t *testing.T) {
	r := bus.Result{ExecutionTag: "t", ActionName: job.ActionNameMain}
	for _, c := range []struct {
		attempt, delivery int
		want              string
	}{
		{0, 0, "t.MainAction.0"}, // a worker of an earlier release
		{0, 1, "t.MainAction.0"},
		{2, 3, "t.MainAction.2"},
		{0, 2, "t.MainAction.0#2"},
		{2, 5, "t.MainAction.2#5"},
	} {
		r.Attempt, r.Delivery = c.attempt, c.delivery
		if got := bus.ResultMsgID(r); got != c.want {
			t.Errorf("attempt %d, delivery %d: %s, want %s", c.attempt, c.delivery, got, c.want)
		}
	}
}
