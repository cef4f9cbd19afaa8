package bus_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

func resultCases() map[string]bus.Result {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	base := bus.Result{
		Collection: "c-1", Job: "j_2", Scheduled: at, ExecutionTag: bus.ExecutionTag("c-1", "j_2", 0, at), Occurrence: 7,
		ActionName: job.ActionNameMain, Attempt: 2, StartTime: at.Add(time.Second), EndTime: at.Add(1500 * time.Millisecond),
		Status: job.ExecutionCompleted,
	}
	edit := func(f func(*bus.Result)) bus.Result { r := base; f(&r); return r }
	return map[string]bus.Result{
		"no message":    base,
		"plain message": edit(func(r *bus.Result) { r.Message = "Http Action - Response from host 'x': 'OK' Status code: 200" }),
		"HTTP message": edit(func(r *bus.Result) {
			r.Message = "Http Action - Response from host '127.0.0.1': 'OK' Response Headers: Content-Length: 2\r\nDate: Mon, 23 Nov 2026 20:00:00 GMT\r\n Body: ok"
		}),
		"message with ASCII escapes": edit(func(r *bus.Result) {
			r.Message = "a \"q\" \\ / <b> & \n\t\r\b\f\x01\x1f\x7f ~"
		}),
		"message in UTF-8": edit(func(r *bus.Result) { r.Message = "Body: <p>café \r\n 日本</p>" }),
		"message to escape": edit(func(r *bus.Result) {
			r.Message = "a \"q\" \\ <b> & \n\t\x01 é \u2028 \ufffd"
		}),
		"failed, final, faulted": edit(func(r *bus.Result) {
			r.Status, r.Final, r.Faulted, r.ActionName = job.ExecutionFailed, true, true, job.ActionNameError
		}),
		"main done":         edit(func(r *bus.Result) { r.MainDone, r.Status = true, job.ExecutionPostponed }),
		"zone offset":       edit(func(r *bus.Result) { r.StartTime = r.StartTime.In(time.FixedZone("", 5*3600+1800)) }),
		"zero times":        edit(func(r *bus.Result) { r.Scheduled, r.StartTime, r.EndTime = time.Time{}, time.Time{}, time.Time{} }),
		"negative numbers":  edit(func(r *bus.Result) { r.Occurrence, r.Attempt = -1, -20 }),
		"zero numbers":      edit(func(r *bus.Result) { r.Occurrence, r.Attempt = 0, 0 }),
		"incarnation":       edit(func(r *bus.Result) { r.Incarnation = 9007199254740993 }),
		"delivery":          edit(func(r *bus.Result) { r.Delivery = 3 }),
		"year out of range": edit(func(r *bus.Result) { r.EndTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
	}
}

// TestResultAppendJSONIsJSONMarshal checks the hand-written encoder against encoding/json.
func TestResultAppendJSONIsJSONMarshal(t *testing.T) {
	for name, r := range resultCases() {
		want, _ := json.Marshal(r)
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("%s: AppendJSON\n got %s\nwant %s", name, got, want)
		}
	}
}

// TestDecodeResultIsJSONUnmarshal reads what the encoder writes, and what other writers may
// (another key order, white space, enumerations in another case), as encoding/json does.
func TestDecodeResultIsJSONUnmarshal(t *testing.T) {
	inputs := map[string]string{}
	for name, r := range resultCases() {
		inputs[name] = string(r.AppendJSON(nil))
	}
	plain := inputs["plain message"]
	inputs["white space"] = strings.ReplaceAll(plain, `,"job":`, `, "job" : `)
	inputs["keys reordered"] = `{"job":"j","collection":"c","status":"Completed","actionName":"MainAction","scheduledTime":"2026-03-01T12:00:00Z"}`
	inputs["enumeration in lower case"] = strings.Replace(plain, `"Completed"`, `"completed"`, 1)
	http := inputs["HTTP message"]
	inputs["escapes json.Marshal does not write"] = strings.Replace(http, `Body: ok`, `Body: \/\u00e9\u00E9\u0041\t`, 1)
	inputs["surrogate pair escaped"] = strings.Replace(http, `Body: ok`, `\ud83d\ude00`, 1)
	inputs["lone surrogate escaped"] = strings.Replace(http, `Body: ok`, `\ud83d`, 1)
	inputs["escape cut short"] = strings.Replace(http, `Body: ok`, `\u00e`, 1)
	inputs["unknown escape"] = strings.Replace(http, `Body: ok`, `\x41`, 1)
	inputs["raw control character"] = strings.Replace(http, `Body: ok`, "\x01", 1)
	inputs["bytes not UTF-8"] = strings.Replace(http, `Body: ok`, "\xff\xfe", 1)
	inputs["escaped name"] = strings.Replace(plain, `"j_2"`, `"j\u005f2"`, 1)
	inputs["unknown key"] = strings.Replace(plain, `{"collection"`, `{"x":1,"collection"`, 1)
	inputs["trailing white space"] = plain + " \n"
	inputs["float attempt"] = strings.Replace(plain, `"attempt":2`, `"attempt":2.0`, 1)
	inputs["leading zero"] = strings.Replace(plain, `"attempt":2`, `"attempt":02`, 1)
	inputs["huge attempt"] = strings.Replace(plain, `"attempt":2`, `"attempt":99999999999999999999`, 1)
	inputs["bad time"] = strings.Replace(plain, `"2026-03-01T12:00:00.123456789Z"`, `"2026-03-01 12:00:00Z"`, 1)
	inputs["truncated"] = plain[:len(plain)-1]
	inputs["not JSON"] = "hello"
	for name, in := range inputs {
		var want bus.Result
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := bus.DecodeResult([]byte(in))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: DecodeResult error %v, json.Unmarshal %v", name, err, wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: DecodeResult\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// FuzzDecodeResult: whatever the input, DecodeResult agrees with json.Unmarshal.
func FuzzDecodeResult(f *testing.F) {
	for _, r := range resultCases() {
		f.Add(r.AppendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want bus.Result
		wantErr := json.Unmarshal(data, &want)
		got, err := bus.DecodeResult(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("DecodeResult error %v, json.Unmarshal %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeResult\n got %+v\nwant %+v", got, want)
		}
	})
}

// FuzzAppendJSON: whatever the message, AppendJSON writes what json.Marshal writes.
func FuzzAppendJSON(f *testing.F) {
	for _, r := range resultCases() {
		f.Add(r.Message)
	}
	r := resultCases()["no message"]
	f.Fuzz(func(t *testing.T, msg string) {
		r.Message = msg
		want, _ := json.Marshal(r)
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkDecodeResult(b *testing.B) {
	data := resultCases()["HTTP message"].AppendJSON(nil)
	b.Run("DecodeResult", func(b *testing.B) {
		for b.Loop() {
			if _, err := bus.DecodeResult(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var r bus.Result
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDecodeResultsIsJSONUnmarshal: arrays of results, as encoding/json reads them.
func TestDecodeResultsIsJSONUnmarshal(t *testing.T) {
	var all []bus.Result
	for _, r := range resultCases() {
		if _, err := json.Marshal(r); err == nil { // not the year out of range
			all = append(all, r)
		}
	}
	one := string(bus.AppendResultsJSON(nil, all[:1]))
	inputs := map[string]string{
		"all":               string(bus.AppendResultsJSON(nil, all)),
		"one":               one,
		"empty":             "[]",
		"null":              "null",
		"white space":       "[ " + one[1:len(one)-1] + " ]",
		"trailing comma":    one[:len(one)-1] + ",]",
		"an object":         one[1 : len(one)-1],
		"truncated":         one[:len(one)-1],
		"a number in it":    "[1]",
		"two, one reworded": "[" + one[1:len(one)-1] + "," + strings.Replace(one[1:len(one)-1], `"Completed"`, `"COMPLETED"`, 1) + "]",
	}
	want, _ := json.Marshal(all)
	if got := bus.AppendResultsJSON(nil, all); string(got) != string(want) {
		t.Errorf("AppendResultsJSON\n got %s\nwant %s", got, want)
	}
	for name, in := range inputs {
		var want []bus.Result
		wantErr := json.Unmarshal([]byte(in), &want)
		got, err := bus.DecodeResults([]byte(in))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: DecodeResults error %v, json.Unmarshal %v", name, err, wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: DecodeResults\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// FuzzDecodeResults: whatever the input, DecodeResults agrees with json.Unmarshal.
func FuzzDecodeResults(f *testing.F) {
	var all []bus.Result
	for _, r := range resultCases() {
		all = append(all, r)
		f.Add(bus.AppendResultsJSON(nil, all))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want []bus.Result
		wantErr := json.Unmarshal(data, &want)
		got, err := bus.DecodeResults(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("DecodeResults error %v, json.Unmarshal %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeResults\n got %+v\nwant %+v", got, want)
		}
	})
}
