package bus_test

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
)

// AppendDue writes by hand what json.Marshal would write for a Due.
func TestDueSizeFitsTheLongestMessage(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 999_999_999, time.FixedZone("x", 3600))
	for _, action := range []json.RawMessage{nil, json.RawMessage(`{"type":"Http"}`)} {
		if b := bus.AppendDue(nil, "c", "j", at, math.MinInt, action); len(b) > bus.DueSize("c", "j", action) {
			t.Errorf("AppendDue wrote %d bytes, DueSize said %d", len(b), bus.DueSize("c", "j", action))
		}
	}
}

func TestAppendDueMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	action := json.RawMessage(`{"type":"Http","request":{"uri":"http://x/\u00e9","method":"GET"}}`)
	var got, want bus.Due
	if err := json.Unmarshal(bus.AppendDue(nil, "c-1", "job_2", at, 7, action), &got); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	b, _ := json.Marshal(bus.Due{Collection: "c-1", Job: "job_2", Scheduled: at, ExecutionTag: bus.ExecutionTag("c-1", "job_2", at), Occurrence: 7, Action: action})
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
		{Kind: bus.EventRejected, Collection: "c", Job: "j", Time: at, Errors: []bus.ErrorEntry{{Path: "a", Message: "b \"quoted\""}}},
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
