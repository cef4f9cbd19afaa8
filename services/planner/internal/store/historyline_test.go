package store

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
)

func TestHistoryLineRoundTripsAndIsSmall(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 7_000_000, time.UTC)
	for _, e := range []job.HistoryEntry{
		{StartTime: start, EndTime: start.Add(17 * time.Millisecond), ExpectedExecutionTime: start.Add(-5 * time.Millisecond),
			ActionName: job.ActionNameMain, Status: job.ExecutionCompleted, RetryCount: 0, RepeatCount: 42, Message: "Http request to host http://t/x answered 200 OK | with a pipe"},
		{StartTime: start, ExpectedExecutionTime: start.Add(-time.Hour), ActionName: job.ActionNameError, Status: job.ExecutionFailed, RetryCount: 3, RepeatCount: 1},
		{StartTime: start, EndTime: start, ExpectedExecutionTime: start, ActionName: job.ActionNameMain, Status: job.ExecutionSkipped, Message: "skipped 3"},
	} {
		line := historyLine(e, 2048)
		got, at, err := parseHistoryLine(line)
		if err != nil || at != start.UnixMilli() {
			t.Fatalf("%q: %v, at %d", line, err, at)
		}
		a, _ := json.Marshal(e)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Errorf("round trip:\n got %s\nwant %s", b, a)
		}
		if size := len(line) - len(e.Message); size > 48 {
			t.Errorf("%d bytes besides the message: %q", size, line)
		}
	}
	// Lines of earlier versions: "<ms>|<json>".
	old := job.HistoryEntry{StartTime: start, ExpectedExecutionTime: start, ActionName: job.ActionNameMain, Status: job.ExecutionCompleted, Message: "ok"}
	b, _ := json.Marshal(old)
	if got, _, err := parseHistoryLine("1772366400007|" + string(b)); err != nil || got.Message != "ok" || !got.StartTime.Equal(start) {
		t.Errorf("an old line: %+v %v", got, err)
	}
}

func TestHistoryMessagesAreCutOnACharacter(t *testing.T) {
	msg := strings.Repeat("é", 10) // two bytes each
	line := historyLine(job.HistoryEntry{StartTime: time.Now(), Message: msg}, 5)
	got, _, err := parseHistoryLine(line)
	if err != nil || got.Message != "éé" {
		t.Errorf("cut message %q (%v), want the first two characters", got.Message, err)
	}
}
