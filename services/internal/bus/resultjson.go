package bus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/resched/resched/shared/job"
)

// A result crosses NATS once per attempt: the worker writes it and a planner reads it back.
// encoding/json spent about 9 µs of the planner's CPU reading one (reflection, and a nested
// decode for each time and enumeration), a fifth of all the planner did per fire. The
// functions below write and read the one layout the worker writes without reflection, and
// hand anything else to encoding/json, so what a result means never depends on the path taken.

// AppendJSON appends the JSON of r to b, byte for byte what json.Marshal writes.
func (r Result) AppendJSON(b []byte) []byte {
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
	if r.Incarnation != 0 {
		b = append(b, `,"incarnation":`...)
		b = strconv.AppendInt(b, r.Incarnation, 10)
	}
	b = append(b, `,"actionName":`...)
	b = appendString(b, string(r.ActionName))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	if r.Delivery != 0 {
		b = append(b, `,"delivery":`...)
		b = strconv.AppendInt(b, int64(r.Delivery), 10)
	}
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

// AppendResultsJSON appends the JSON array of rs to b, byte for byte what json.Marshal
// writes (for a nil or empty rs, an empty array).
func AppendResultsJSON(b []byte, rs []Result) []byte {
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.AppendJSON(b)
	}
	return append(b, ']')
}

// DecodeResult reads a result as json.Unmarshal does. The layout AppendJSON writes, with
// strings of printable ASCII, is read directly; any other JSON goes to json.Unmarshal.
func DecodeResult(data []byte) (Result, error) {
	d := layoutReader{b: data, ok: true}
	if r := d.result(); d.ok && len(d.b) == 0 {
		return r, nil
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return Result{}, fmt.Errorf("not a result: %w", err)
	}
	return r, nil
}

// DecodeResults reads a JSON array of results as json.Unmarshal does, AppendResultsJSON's
// layout directly.
func DecodeResults(data []byte) ([]Result, error) {
	if rs, ok := decodeResultsFast(data); ok {
		return rs, nil
	}
	var rs []Result
	if err := json.Unmarshal(data, &rs); err != nil {
		return nil, fmt.Errorf("not an array of results: %w", err)
	}
	return rs, nil
}

func decodeResultsFast(data []byte) ([]Result, bool) {
	d := layoutReader{b: data, ok: true}
	d.field("[")
	if d.has("]") {
		return []Result{}, len(d.b) == 1
	}
	rs := make([]Result, 0, bytes.Count(data, []byte(`{"collection":`)))
	for d.ok {
		rs = append(rs, d.result())
		if d.has("]") {
			return rs, len(d.b) == 1
		}
		d.field(",")
	}
	return nil, false
}

// result reads one result in AppendJSON's layout; d.ok is false at the first byte it does
// not expect.
func (d *layoutReader) result() (r Result) {
	r.Collection = d.field(`{"collection":`).str()
	r.Job = d.field(`,"job":`).str()
	r.Scheduled = d.field(`,"scheduledTime":`).time()
	r.ExecutionTag = d.field(`,"executionTag":`).str()
	r.Occurrence = d.field(`,"occurrence":`).int()
	if d.has(`,"incarnation":`) {
		r.Incarnation = int64(d.field(`,"incarnation":`).int())
	}
	r.ActionName = job.ActionName(d.field(`,"actionName":`).enum(string(job.ActionNameMain), string(job.ActionNameError)))
	r.Attempt = d.field(`,"attempt":`).int()
	if d.has(`,"delivery":`) {
		r.Delivery = d.field(`,"delivery":`).int()
	}
	r.StartTime = d.field(`,"startTime":`).time()
	r.EndTime = d.field(`,"endTime":`).time()
	r.Status = job.ExecutionStatus(d.field(`,"status":`).enum(string(job.ExecutionCompleted), string(job.ExecutionFailed),
		string(job.ExecutionPostponed), string(job.ExecutionSkipped)))
	if d.has(`,"message":`) {
		r.Message = d.field(`,"message":`).str()
	}
	r.MainDone = d.field(`,"mainDone":`).bool()
	r.Final = d.field(`,"final":`).bool()
	r.Faulted = d.field(`,"faulted":`).bool()
	d.field(`}`)
	return r
}

// layoutReader reads the layouts this package writes (AppendJSON, AppendDue) from b; ok
// turns false for good at the first surprise.
type layoutReader struct {
	b  []byte
	ok bool
}

func (d *layoutReader) has(prefix string) bool { return d.ok && bytes.HasPrefix(d.b, []byte(prefix)) }

// field consumes the exact text prefix.
func (d *layoutReader) field(prefix string) *layoutReader {
	if d.has(prefix) {
		d.b = d.b[len(prefix):]
	} else {
		d.ok = false
	}
	return d
}

// raw consumes a string of printable ASCII other than '"' and '\', returning its content:
// for times and enumerations, which are written so. Times take no escapes at all, since
// time.Time reads its JSON without unescaping it; str reads any other string.
func (d *layoutReader) raw() []byte {
	if !d.ok || len(d.b) == 0 || d.b[0] != '"' {
		d.ok = false
		return nil
	}
	for i := 1; i < len(d.b); i++ {
		switch c := d.b[i]; {
		case c == '"':
			s := d.b[1:i]
			d.b = d.b[i+1:]
			return s
		case c < 0x20 || c > 0x7e || c == '\\':
			d.ok = false
			return nil
		}
	}
	d.ok = false
	return nil
}

// str consumes a string as encoding/json reads it when it is valid UTF-8 with the escapes
// json.Marshal writes (an HTTP result's message has a "\r\n" per response header); a
// surrogate escape or bytes that are not UTF-8 go to encoding/json.
func (d *layoutReader) str() string {
	if !d.ok || len(d.b) == 0 || d.b[0] != '"' {
		d.ok = false
		return ""
	}
	var out []byte // nil until the first escape
	start, ascii := 1, true
	for i := 1; i < len(d.b); {
		c := d.b[i]
		switch {
		case c == '"':
			s := d.b[start:i]
			d.b = d.b[i+1:]
			if !ascii && !utf8.Valid(s) {
				d.ok = false
				return ""
			}
			if out == nil {
				return string(s)
			}
			return string(append(out, s...))
		case c < 0x20:
			d.ok = false
			return ""
		case c >= utf8.RuneSelf:
			ascii = false
			i++
		case c != '\\':
			i++
		default:
			// Each stretch between escapes is checked: bytes that are not UTF-8 are
			// encoding/json's to replace (the fuzz target found one left as it was).
			if !ascii && !utf8.Valid(d.b[start:i]) {
				d.ok = false
				return ""
			}
			out = append(out, d.b[start:i]...)
			n, ok := unescape(d.b[i:], &out)
			if !ok {
				d.ok = false
				return ""
			}
			i += n
			start = i
		}
	}
	d.ok = false
	return ""
}

// unescape appends the character the escape at the start of b stands for and reports the
// escape's length; surrogates are left to encoding/json.
func unescape(b []byte, out *[]byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '"', '\\', '/':
		*out = append(*out, b[1])
	case 'b':
		*out = append(*out, '\b')
	case 'f':
		*out = append(*out, '\f')
	case 'n':
		*out = append(*out, '\n')
	case 'r':
		*out = append(*out, '\r')
	case 't':
		*out = append(*out, '\t')
	case 'u':
		if len(b) < 6 {
			return 0, false
		}
		r, err := strconv.ParseUint(string(b[2:6]), 16, 16)
		if err != nil || utf16.IsSurrogate(rune(r)) {
			return 0, false
		}
		*out = utf8.AppendRune(*out, rune(r))
		return 6, true
	default:
		return 0, false
	}
	return 2, true
}

// enum consumes one of the canonical values exactly (another spelling goes to
// encoding/json, whose reading of enumerations ignores case).
func (d *layoutReader) enum(values ...string) string {
	s := d.raw()
	for _, v := range values {
		if string(s) == v {
			return v
		}
	}
	d.ok = false
	return ""
}

// time consumes a quoted RFC 3339 time, read as time.Time's UnmarshalJSON reads it.
func (d *layoutReader) time() time.Time {
	var t time.Time
	if s := d.raw(); d.ok && t.UnmarshalText(s) != nil {
		d.ok = false
	}
	return t
}

// int consumes a JSON integer that fits an int: an optional '-', then 0 or digits without a
// leading 0.
func (d *layoutReader) int() int {
	i := 0
	if i < len(d.b) && d.b[i] == '-' {
		i++
	}
	start := i
	for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
		i++
	}
	if !d.ok || i == start || (d.b[start] == '0' && i > start+1) || (i < len(d.b) && (d.b[i] == '.' || d.b[i] == 'e' || d.b[i] == 'E')) {
		d.ok = false
		return 0
	}
	n, err := strconv.Atoi(string(d.b[:i]))
	if err != nil {
		d.ok = false
		return 0
	}
	d.b = d.b[i:]
	return n
}

func (d *layoutReader) bool() bool {
	switch {
	case d.has("true"):
		d.b = d.b[4:]
		return true
	case d.has("false"):
		d.b = d.b[5:]
		return false
	}
	d.ok = false
	return false
}

// jsonTime reports whether t marshals as JSON: time.Time.MarshalJSON wants a 4-digit year
// and a zone offset under 24 hours.
func jsonTime(t time.Time) bool {
	y := t.Year()
	_, off := t.Zone()
	return y >= 0 && y <= 9999 && off > -24*3600 && off < 24*3600
}

// appendString appends s as a JSON string, byte for byte what json.Marshal writes. ASCII is
// escaped here as encoding/json escapes it (HTML characters included); a string with other
// bytes goes through json.Marshal.
func appendString(b []byte, s string) []byte {
	n0 := len(b)
	b = append(b, '"')
	start := 0
	for i := range len(s) {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c >= utf8.RuneSelf {
				data, _ := json.Marshal(s) // a string always marshals
				return append(b[:n0], data...)
			}
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"
