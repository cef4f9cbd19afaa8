package bus_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// actionInputs are actions as the planner stores them and in other spellings encoding/json
// accepts or refuses.
func actionInputs() map[string]string {
	return map[string]string{
		"written":         `{"type":"Http","request":{"uri":"http://127.0.0.1:8080/hook","method":"POST","headers":{"Content-Type":"application/json"},"body":"{\"a\":1}"},"retryPolicy":{"retryType":"Fixed","retryInterval":"00:00:30","retryCount":3}}`,
		"bare":            `{"type":"Https","request":{"uri":"https://x/","method":"GET"}}`,
		"empty policy":    `{"type":"Http","request":{"uri":"http://x/","method":"GET"},"retryPolicy":{}}`,
		"iso interval":    `{"type":"Http","request":{"uri":"http://x/","method":"GET"},"retryPolicy":{"retryInterval":"PT1M"}}`,
		"bad interval":    `{"type":"Http","request":{"uri":"http://x/","method":"GET"},"retryPolicy":{"retryInterval":"soon"}}`,
		"lower case type": `{"type":"http","request":{"uri":"http://x/","method":"GET"}}`,
		"unknown type":    `{"type":"Carrier pigeon","request":{"uri":"http://x/","method":"GET"}}`,
		"spaces":          `{ "type": "Http", "request": { "uri": "http://x/", "method": "GET" } }`,
		"order":           `{"request":{"method":"GET","uri":"http://x/"},"type":"Http"}`,
		"repeated header": `{"type":"Http","request":{"uri":"http://x/","method":"GET","headers":{"a":"1","a":"2"}}}`,
		"empty headers":   `{"type":"Http","request":{"uri":"http://x/","method":"GET","headers":{}}}`,
		"null headers":    `{"type":"Http","request":{"uri":"http://x/","method":"GET","headers":null}}`,
		"escapes":         `{"type":"Http","request":{"uri":"http://x/\u00e9\u003c","method":"G\"ET","body":"a\r\nb\\"}}`,
		"not UTF-8":       "{\"type\":\"Http\",\"request\":{\"uri\":\"http://x/\xff\",\"method\":\"GET\"}}",
		"huge count":      `{"type":"Http","request":{"uri":"http://x/","method":"GET"},"retryPolicy":{"retryCount":99999999999999999999}}`,
		"float count":     `{"type":"Http","request":{"uri":"http://x/","method":"GET"},"retryPolicy":{"retryCount":2.0}}`,
		"queue":           `{"type":"StorageQueue","queueMessage":{"storageAccount":"a","queueName":"q","sasToken":"?sig=s","message":"m"}}`,
		"trailing":        `{"type":"Http","request":{"uri":"http://x/","method":"GET"}}x`,
		"truncated":       `{"type":"Http","request":{"uri":"http://x/","method":"GET"}`,
		"null":            `null`,
	}
}

func TestDecodeActionAgreesWithEncodingJSON(t *testing.T) {
	for name, in := range actionInputs() {
		checkDecodeAction(t, name, []byte(in))
	}
}

// FuzzDecodeAction: whatever the input, DecodeAction agrees with json.Unmarshal.
func FuzzDecodeAction(f *testing.F) {
	for _, in := range actionInputs() {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecodeAction(t, "fuzz", data) })
}

func checkDecodeAction(t *testing.T, name string, data []byte) {
	t.Helper()
	var want job.Action
	wantErr := json.Unmarshal(data, &want)
	got, err := bus.DecodeAction(data)
	if (err != nil) != (wantErr != nil) {
		t.Errorf("%s: DecodeAction error %v, json.Unmarshal %v", name, err, wantErr)
		return
	}
	if err == nil && !reflect.DeepEqual(*got, want) {
		t.Errorf("%s: DecodeAction\n got %+v\nwant %+v", name, got, want)
	}
}

func BenchmarkDecodeAction(b *testing.B) {
	data := []byte(actionInputs()["written"])
	b.Run("DecodeAction", func(b *testing.B) {
		for b.Loop() {
			if _, err := bus.DecodeAction(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var a job.Action
			if err := json.Unmarshal(data, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}
