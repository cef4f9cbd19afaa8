package job

import (
	"encoding/json"
	"testing"
	"time"
)

func TestCollectionRoundTrip(t *testing.T) {
	in := `{"name":"demo","location":"South Central US","tags":{"department":"marketing"},
		"properties":{"sku":{"name":"free"},"state":"disabled",
			"quota":{"maxJobCount":5,"maxRecurrence":{"frequency":"hour","interval":1}}}}`
	var c Collection
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(c)
	want := `{"name":"demo","location":"South Central US","tags":{"department":"marketing"},` +
		`"properties":{"sku":{"name":"Free"},"state":"Disabled","quota":{"maxJobCount":5,"maxRecurrence":{"frequency":"Hour","interval":1}}}}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestHistoryEntryJSON(t *testing.T) {
	start := time.Date(2016, 3, 30, 20, 39, 53, 802195100, time.UTC)
	e := HistoryEntry{
		StartTime: start, EndTime: start.Add(62 * time.Millisecond), ExpectedExecutionTime: start.Add(-time.Second),
		ActionName: ActionNameMain, Status: ExecutionCompleted, Message: "Http Action - Response from host 'localhost': 'OK'",
		RetryCount: 0, RepeatCount: 135,
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var back HistoryEntry
	if err := json.Unmarshal([]byte(
		`{"startTime":"2016-03-30T20:39:53.8021951Z","endTime":"2016-03-30T20:39:53.8641951Z","expectedExecutionTime":"2016-03-30T20:39:52.8021951Z",`+
			`"actionName":"mainaction","status":"completed","message":"Http Action - Response from host 'localhost': 'OK'","retryCount":0,"repeatCount":135}`), &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(out) {
		t.Errorf("got  %s\nwant %s", again, out)
	}
}

func TestStatusOmitsAbsentTimes(t *testing.T) {
	next := time.Date(2016, 3, 30, 20, 40, 0, 0, time.UTC)
	out, _ := json.Marshal(Status{NextExecutionTime: &next})
	want := `{"executionCount":0,"failureCount":0,"faultedCount":0,"nextExecutionTime":"2016-03-30T20:40:00Z"}`
	if string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
