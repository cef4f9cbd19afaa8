package consumer

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/resched/resched/services/internal/bus"
)

// appendResult appends the JSON of r to b, byte for byte what json.Marshal writes, without
// reflection: one is written per attempt.
func appendResult(b []byte, r bus.Result) []byte {
	if !jsonTime(r.Scheduled) || !jsonTime(r.StartTime) || !jsonTime(r.EndTime) {
		data, _ := json.Marshal(r) // json.Marshal reports such a time; a Result never holds one
		return append(b, data...)
	}
	b = append(b, `{"collection":`...)
	b = appendString(b, r.Collection)
	b = append(b, `,"job":`...)
	b = appendString(b, r.Job)
	b = append(b, `,"scheduledTime":"`...)
	b = r.Scheduled.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","executionTag":`...)
	b = appendString(b, r.ExecutionTag)
	b = append(b, `,"occurrence":`...)
	b = strconv.AppendInt(b, int64(r.Occurrence), 10)
	b = append(b, `,"actionName":`...)
	b = appendString(b, string(r.ActionName))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	b = append(b, `,"startTime":"`...)
	b = r.StartTime.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","endTime":"`...)
	b = r.EndTime.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","status":`...)
	b = appendString(b, string(r.Status))
	if r.Message != "" {
		b = append(b, `,"message":`...)
		b = appendString(b, r.Message)
	}
	b = append(b, `,"mainDone":`...)
	b = strconv.AppendBool(b, r.MainDone)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, r.Final)
	b = append(b, `,"faulted":`...)
	b = strconv.AppendBool(b, r.Faulted)
	return append(b, '}')
}

// jsonTime reports whether t marshals as JSON: time.Time.MarshalJSON wants a 4-digit year
// and a zone offset under 24 hours.
func jsonTime(t time.Time) bool {
	y := t.Year()
	_, off := t.Zone()
	return y >= 0 && y <= 9999 && off > -24*3600 && off < 24*3600
}

// appendString appends s as a JSON string. Plain printable ASCII is copied; anything else
// goes through json.Marshal, which escapes it (HTML characters included) as it always did.
func appendString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, _ := json.Marshal(s) // a string always marshals
			return append(b, data...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
