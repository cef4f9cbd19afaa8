package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
)

// A history entry is stored as one line, its time first so that the scripts can drop old
// entries without reading the rest:
//
//	<start ms>|~|<status>|<action>|<retryCount>|<repeatCount>|<expected − start, ms>|<end − start, ms>|<message>
//
// Status and action are one letter each (statusCodes, actionCodes), times are the start's
// offsets, and the message runs to the end of the line: about 35 bytes besides the message,
// where the JSON of earlier versions took about 390 ("<ms>|{json}", still read).
const lineMark = "~"

var (
	statusCodes = map[job.ExecutionStatus]string{job.ExecutionCompleted: "C", job.ExecutionFailed: "F",
		job.ExecutionPostponed: "P", job.ExecutionSkipped: "S"}
	actionCodes = map[job.ActionName]string{job.ActionNameMain: "M", job.ActionNameError: "E"}
)

// historyLine writes an entry, its message cut to maxMessage bytes (on a rune boundary).
func historyLine(e job.HistoryEntry, maxMessage int) string {
	at := e.StartTime
	if at.IsZero() {
		at = e.ExpectedExecutionTime
	}
	start := at.UnixMilli()
	status, ok := statusCodes[e.Status]
	if !ok {
		status = string(e.Status)
	}
	action, ok := actionCodes[e.ActionName]
	if !ok {
		action = string(e.ActionName)
	}
	var b strings.Builder
	b.Grow(48 + len(e.Message))
	b.WriteString(strconv.FormatInt(start, 10))
	b.WriteString("|" + lineMark + "|" + status + "|" + action + "|")
	b.WriteString(strconv.Itoa(e.RetryCount))
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(e.RepeatCount))
	b.WriteByte('|')
	b.WriteString(offset(e.ExpectedExecutionTime, start))
	b.WriteByte('|')
	b.WriteString(offset(e.EndTime, start))
	b.WriteByte('|')
	b.WriteString(job.CutMessage(e.Message, maxMessage))
	return b.String()
}

// offset writes t as milliseconds after start, or "" for a zero time.
func offset(t time.Time, start int64) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli()-start, 10)
}

// parseHistoryLine reads a line of either form; it also returns the line's time (ms).
func parseHistoryLine(line string) (job.HistoryEntry, int64, error) {
	at, rest, _ := strings.Cut(line, "|")
	start, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return job.HistoryEntry{}, 0, fmt.Errorf("history line without its time")
	}
	if !strings.HasPrefix(rest, lineMark+"|") {
		var e job.HistoryEntry
		if err := json.Unmarshal([]byte(rest), &e); err != nil {
			return job.HistoryEntry{}, 0, err
		}
		return e, start, nil
	}
	f := strings.SplitN(rest[len(lineMark)+1:], "|", 7)
	if len(f) != 7 {
		return job.HistoryEntry{}, 0, fmt.Errorf("history line with %d fields", len(f))
	}
	e := job.HistoryEntry{StartTime: time.UnixMilli(start).UTC(), Status: job.ExecutionStatus(f[0]), ActionName: job.ActionName(f[1]), Message: f[6]}
	for s, code := range statusCodes {
		if code == f[0] {
			e.Status = s
		}
	}
	for a, code := range actionCodes {
		if code == f[1] {
			e.ActionName = a
		}
	}
	e.RetryCount, _ = strconv.Atoi(f[2])
	e.RepeatCount, _ = strconv.Atoi(f[3])
	e.ExpectedExecutionTime = fromOffset(f[4], start)
	e.EndTime = fromOffset(f[5], start)
	return e, start, nil
}

func fromOffset(s string, start int64) time.Time {
	if s == "" {
		return time.Time{}
	}
	d, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(start + d).UTC()
}
