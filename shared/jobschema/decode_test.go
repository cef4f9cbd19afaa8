package jobschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
)

// withRecurrence returns a bare job with a valid HTTP action and the given recurrence JSON.
func withRecurrence(rec string) string {
	return `{"action":{"type":"Http","request":{"uri":"http://localhost:8080/","method":"GET"}},"recurrence":` + rec + `}`
}

// withAction returns a bare job with the given action JSON and no recurrence.
func withAction(action string) string {
	return `{"action":` + action + `}`
}

const httpAction = `"type":"Http","request":{"uri":"http://localhost:8080/","method":"GET"}`

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name, in, path, fragment string
	}{
		// docs/recurrence.md section 8, in its order.
		{"missing frequency", withRecurrence(`{"interval":1}`), "recurrence.frequency", "is required"},
		{"unknown frequency", withRecurrence(`{"frequency":"Fortnight"}`), "recurrence.frequency", "must be one of Second, Minute"},
		{"frequency as number", withRecurrence(`{"frequency":3}`), "recurrence.frequency", "must be one of"},
		{"interval 0", withRecurrence(`{"frequency":"Day","interval":0}`), "recurrence.interval", "must be at least 1"},
		{"interval negative", withRecurrence(`{"frequency":"Minute","interval":-3}`), "recurrence.interval", "must be at least 1"},
		{"interval Second", withRecurrence(`{"frequency":"Second","interval":10000000}`), "recurrence.interval", "between 1 and 9,999,999 for frequency Second"},
		{"interval Minute", withRecurrence(`{"frequency":"Minute","interval":1001}`), "recurrence.interval", "between 1 and 1,000 for frequency Minute"},
		{"interval Hour", withRecurrence(`{"frequency":"Hour","interval":1001}`), "recurrence.interval", "between 1 and 1,000 for frequency Hour"},
		{"interval Day", withRecurrence(`{"frequency":"Day","interval":549}`), "recurrence.interval", "between 1 and 548 for frequency Day"},
		{"interval Week", withRecurrence(`{"frequency":"Week","interval":79}`), "recurrence.interval", "must be between 1 and 78 for frequency Week"},
		{"interval Month", withRecurrence(`{"frequency":"Month","interval":19}`), "recurrence.interval", "between 1 and 18 for frequency Month"},
		{"interval Year", withRecurrence(`{"frequency":"Year","interval":2}`), "recurrence.interval", "must be 1 for frequency Year"},
		{"weekDays with Day", withRecurrence(`{"frequency":"Day","schedule":{"weekDays":["Monday"]}}`), "recurrence.schedule.weekDays", "only allowed with frequency Week"},
		{"weekDays with Month", withRecurrence(`{"frequency":"Month","schedule":{"weekDays":["Monday"]}}`), "recurrence.schedule.weekDays", "only allowed with frequency Week"},
		{"weekDays with Second", withRecurrence(`{"frequency":"Second","schedule":{"weekDays":["Monday"]}}`), "recurrence.schedule.weekDays", "only allowed with frequency Week"},
		{"monthDays with Week", withRecurrence(`{"frequency":"Week","schedule":{"monthDays":[1]}}`), "recurrence.schedule.monthDays", "only allowed with frequency Month or Year"},
		{"monthDays with Hour", withRecurrence(`{"frequency":"Hour","schedule":{"monthDays":[1]}}`), "recurrence.schedule.monthDays", "only allowed with frequency Month or Year"},
		{"monthlyOccurrences with Day", withRecurrence(`{"frequency":"Day","schedule":{"monthlyOccurrences":[{"day":"Monday"}]}}`), "recurrence.schedule.monthlyOccurrences", "only allowed with frequency Month or Year"},
		{"months with Week", withRecurrence(`{"frequency":"Week","schedule":{"months":[1]}}`), "recurrence.schedule.months", "only allowed with frequency Month or Year"},
		{"months with Minute", withRecurrence(`{"frequency":"Minute","schedule":{"months":[1]}}`), "recurrence.schedule.months", "only allowed with frequency Month or Year"},
		{"minute 60", withRecurrence(`{"frequency":"Day","schedule":{"minutes":[0,60]}}`), "recurrence.schedule.minutes[1]", "must be between 0 and 59"},
		{"minute -1", withRecurrence(`{"frequency":"Day","schedule":{"minutes":[-1]}}`), "recurrence.schedule.minutes[0]", "must be between 0 and 59"},
		{"hour 24", withRecurrence(`{"frequency":"Day","schedule":{"hours":[1,24]}}`), "recurrence.schedule.hours[1]", "must be between 0 and 23"},
		{"hour scalar 24", withRecurrence(`{"frequency":"Day","schedule":{"hours":24}}`), "recurrence.schedule.hours[0]", "must be between 0 and 23"},
		{"month 0", withRecurrence(`{"frequency":"Year","schedule":{"months":[0]}}`), "recurrence.schedule.months[0]", "must be between 1 and 12"},
		{"month 13", withRecurrence(`{"frequency":"Month","schedule":{"months":[13]}}`), "recurrence.schedule.months[0]", "must be between 1 and 12"},
		{"monthDay 0", withRecurrence(`{"frequency":"Month","schedule":{"monthDays":[1,2,0]}}`), "recurrence.schedule.monthDays[2]", "between 1 and 31, or between -31 and -1"},
		{"monthDay 32", withRecurrence(`{"frequency":"Month","schedule":{"monthDays":[32]}}`), "recurrence.schedule.monthDays[0]", "between 1 and 31, or between -31 and -1"},
		{"monthDay -32", withRecurrence(`{"frequency":"Year","schedule":{"monthDays":[-32]}}`), "recurrence.schedule.monthDays[0]", "between 1 and 31, or between -31 and -1"},
		{"occurrence 0", withRecurrence(`{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Friday","occurrence":0}]}}`), "recurrence.schedule.monthlyOccurrences[0].occurrence", "between 1 and 5, or between -5 and -1"},
		{"occurrence 6", withRecurrence(`{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Friday","Occurrence":6}]}}`), "recurrence.schedule.monthlyOccurrences[0].occurrence", "between 1 and 5, or between -5 and -1"},
		{"occurrence -6", withRecurrence(`{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Friday","occurrence":-6}]}}`), "recurrence.schedule.monthlyOccurrences[0].occurrence", "between 1 and 5, or between -5 and -1"},
		{"occurrence without day", withRecurrence(`{"frequency":"Month","schedule":{"monthlyOccurrences":[{"occurrence":1}]}}`), "recurrence.schedule.monthlyOccurrences[0].day", "is required"},
		{"unknown weekday", withRecurrence(`{"frequency":"Week","schedule":{"weekDays":["Mon"]}}`), "recurrence.schedule.weekDays[0]", `must be one of Sunday, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, not "Mon"`},
		{"unknown occurrence day", withRecurrence(`{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Caturday"}]}}`), "recurrence.schedule.monthlyOccurrences[0].day", "must be one of Sunday"},
		{"fraction", withRecurrence(`{"frequency":"Day","interval":2.5}`), "recurrence.interval", "must be a whole number, not 2.5"},
		{"fraction in a list", withRecurrence(`{"frequency":"Day","schedule":{"hours":[1.5]}}`), "recurrence.schedule.hours[0]", "must be a whole number, not 1.5"},
		{"number as string", withRecurrence(`{"frequency":"Day","count":"5"}`), "recurrence.count", "must be a whole number, not a string"},
		{"interval as string", withRecurrence(`{"frequency":"Day","interval":"2"}`), "recurrence.interval", "must be a whole number, not a string"},
		{"hours as string", withRecurrence(`{"frequency":"Day","schedule":{"hours":"5"}}`), "recurrence.schedule.hours", "must be a whole number or a list, not a string"},
		{"hour as string", withRecurrence(`{"frequency":"Day","schedule":{"hours":["5"]}}`), "recurrence.schedule.hours[0]", "must be a whole number, not a string"},
		{"empty hours", withRecurrence(`{"frequency":"Day","schedule":{"hours":[]}}`), "recurrence.schedule.hours", "must not be an empty list"},
		{"empty weekDays", withRecurrence(`{"frequency":"Week","schedule":{"weekDays":[]}}`), "recurrence.schedule.weekDays", "must not be an empty list"},
		{"empty monthlyOccurrences", withRecurrence(`{"frequency":"Month","schedule":{"monthlyOccurrences":[]}}`), "recurrence.schedule.monthlyOccurrences", "must not be an empty list"},
		{"empty schedule", withRecurrence(`{"frequency":"Day","schedule":{}}`), "recurrence.schedule", "must not be an empty object"},
		{"schedule of nulls", withRecurrence(`{"frequency":"Day","schedule":{"hours":null}}`), "recurrence.schedule", "must not be an empty object"},
		{"count 0", withRecurrence(`{"frequency":"Day","count":0}`), "recurrence.count", "must be at least 1"},
		{"count -1", withRecurrence(`{"frequency":"Day","count":-1}`), "recurrence.count", "must be at least 1"},
		{"count too big", withRecurrence(`{"frequency":"Day","count":1e30}`), "recurrence.count", "must be at most 2,147,483,647"},
		{"unknown timeZone", withRecurrence(`{"frequency":"Day","timeZone":"Europe/Atlantis"}`), "recurrence.timeZone", `unknown time zone "Europe/Atlantis"`},
		{"local timeZone", withRecurrence(`{"frequency":"Day","timeZone":"Local"}`), "recurrence.timeZone", "unknown time zone"},
		{"bad endTime", withRecurrence(`{"frequency":"Day","endTime":"2024-13-01"}`), "recurrence.endTime", "month must be 01 to 12"},
		{"endTime as number", withRecurrence(`{"frequency":"Day","endTime":20240101}`), "recurrence.endTime", "must be a string, not 20240101"},
		{"bad startTime", `{"startTime":"yesterday","action":{` + httpAction + `}}`, "startTime", `invalid date-time "yesterday"`},
		{"unknown property", withRecurrence(`{"frequency":"Day","intervall":2}`), "recurrence.intervall", "is not a known property"},
		{"unknown top-level property", `{"action":{` + httpAction + `},"reccurence":{}}`, "reccurence", "is not a known property"},
		{"huge exponent", withRecurrence(`{"frequency":"Day","interval":1e999999999}`), "recurrence.interval", "the exponent of a number must be between -400 and 400"},
		{"huge exponent in a header", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","headers":{"X":1e9999999}}}`), `action.request.headers.X`, "exponent"},
		{"given twice", withRecurrence(`{"frequency":"Day","Interval":1,"interval":2}`), "recurrence.interval", `given twice, as "Interval" and "interval"`},
		{"given twice in an array", withRecurrence(`{"frequency":"Month","interval":1,"schedule":{"monthlyOccurrences":[{"day":"Monday"},{"day":"Friday","Day":"Monday"}]}}`), "recurrence.schedule.monthlyOccurrences[1].day", `given twice, as "Day" and "day"`},

		// Limits of the original service (reference, section 5.1) and client rules.
		{"uri too long", withAction(`{"type":"Http","request":{"uri":"http://localhost/` + strings.Repeat("a", 2049-17) + `","method":"GET"}}`), "action.request.uri", "must be at most 2,048 characters"},
		{"ftp uri", withAction(`{"type":"Http","request":{"uri":"ftp://localhost/x","method":"GET"}}`), "action.request.uri", "must be an http:// or https:// URL"},
		{"relative uri", withAction(`{"type":"Http","request":{"uri":"/hook","method":"GET"}}`), "action.request.uri", "must be an http:// or https:// URL"},
		{"uri without host", withAction(`{"type":"Http","request":{"uri":"http:///hook","method":"GET"}}`), "action.request.uri", "absolute http or https URL with a host"},
		{"51 headers", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","headers":{` + headers(51, 1) + `}}}`), "action.request.headers", "must have at most 50 headers"},
		{"headers too long", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","headers":{` + headers(2, 2100) + `}}}`), "action.request.headers", "add up to 4210 characters; at most 4,096"},
		{"bad header name", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","headers":{"Bad Name":"x"}}}`), `action.request.headers["Bad Name"]`, "is not a valid header name"},
		{"header line break", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","headers":{"X-A":"a\r\nX-B: b"}}}`), `action.request.headers["X-A"]`, "must not contain line breaks"},
		{"body too long", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"POST","body":"` + strings.Repeat("b", 8193) + `"}}`), "action.request.body", "must be at most 8,192 characters"},
		{"retryCount 21", withAction(`{` + httpAction + `,"retryPolicy":{"retryCount":21}}`), "action.retryPolicy.retryCount", "must be between 0 and 20"},
		{"retryCount -1", withAction(`{` + httpAction + `,"retryPolicy":{"retryCount":-1}}`), "action.retryPolicy.retryCount", "must be between 0 and 20"},
		{"retryInterval 14s", withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"00:00:14"}}`), "action.retryPolicy.retryInterval", "must be at least 00:00:15 (15 seconds)"},
		{"retryInterval PT5S", withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"PT5S"}}`), "action.retryPolicy.retryInterval", "must be at least 00:00:15"},
		{"retryInterval too long", withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"P549D"}}`), "action.retryPolicy.retryInterval", "must be at most 548.00:00:00"},
		{"retryInterval months", withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"P1M"}}`), "action.retryPolicy.retryInterval", "no fixed length"},
		{"retryInterval number", withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":30}}`), "action.retryPolicy.retryInterval", "must be a string, not 30"},
		{"unknown retryType", withAction(`{` + httpAction + `,"retryPolicy":{"retryType":"Exponential"}}`), "action.retryPolicy.retryType", "must be one of None, Fixed"},
		{"error action retry", withAction(`{` + httpAction + `,"errorAction":{` + httpAction + `,"retryPolicy":{"retryInterval":"00:00:01"}}}`), "action.errorAction.retryPolicy.retryInterval", "must be at least 00:00:15"},
		{"state Completed", `{"state":"completed","action":{` + httpAction + `}}`, "state", "cannot be set to Completed"},
		{"state Faulted", `{"state":"Faulted","action":{` + httpAction + `}}`, "state", "cannot be set to Faulted"},
		{"unknown state", `{"state":"Paused","action":{` + httpAction + `}}`, "state", "must be one of Enabled, Disabled, Completed, Faulted"},
		{"no action", `{"recurrence":{"frequency":"Day"}}`, "action", "is required"},
		{"action without type", withAction(`{"request":{"uri":"http://localhost/","method":"GET"}}`), "action.type", "is required"},
		{"unknown action type", withAction(`{"type":"Ftp"}`), "action.type", "must be one of Http, Https, StorageQueue, ServiceBusQueue, ServiceBusTopic"},
		{"http without request", withAction(`{"type":"Https"}`), "action.request", "is required for action type Http or Https"},
		{"request without uri", withAction(`{"type":"Http","request":{"method":"GET"}}`), "action.request.uri", "is required"},
		{"unknown method", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"FETCH"}}`), "action.request.method", "must be one of GET, PUT, POST"},
		{"payload of another type", withAction(`{` + httpAction + `,"queueMessage":{"storageAccount":"a","queueName":"q12","sasToken":"s","message":"m"}}`), "action.queueMessage", "only allowed with action type StorageQueue"},
		{"nested error action", withAction(`{` + httpAction + `,"errorAction":{` + httpAction + `,"errorAction":{` + httpAction + `}}}`), "action.errorAction.errorAction", "an error action cannot have its own error action"},
		{"basic without password", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","authentication":{"type":"Basic","username":"u"}}}`), "action.request.authentication.password", "is required for Basic authentication"},
		{"basic with empty username", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","authentication":{"type":"Basic","username":"","password":"p"}}}`), "action.request.authentication.username", "must not be empty"},
		{"oauth without secret", withAction(`{"type":"Https","request":{"uri":"https://localhost/","method":"GET","authentication":{"type":"ActiveDirectoryOAuth","tenant":"t","audience":"a","clientId":"c"}}}`), "action.request.authentication.secret", "is required for ActiveDirectoryOAuth authentication"},
		{"storage queue without sasToken", withAction(`{"type":"StorageQueue","queueMessage":{"storageAccount":"a","queueName":"jobs","message":"m"}}`), "action.queueMessage.sasToken", "is required"},
		{"bad queue name", withAction(`{"type":"StorageQueue","queueMessage":{"storageAccount":"a","queueName":"Jobs_1","sasToken":"s","message":"m"}}`), "action.queueMessage.queueName", "must be 3 to 63 lowercase letters"},
		{"service bus without key", withAction(`{"type":"ServiceBusQueue","serviceBusQueueMessage":{"namespace":"n","queueName":"q","authentication":{"sasKeyName":"k"}}}`), "action.serviceBusQueueMessage.authentication.sasKey", "is required"},
		{"topic with queueName", withAction(`{"type":"ServiceBusTopic","serviceBusTopicMessage":{"namespace":"n","topicPath":"t","queueName":"q","authentication":{"sasKeyName":"k","sasKey":"s"}}}`), "action.serviceBusTopicMessage.queueName", "not allowed in a topic message"},
		{"bad timeToLive", withAction(`{"type":"ServiceBusQueue","serviceBusQueueMessage":{"namespace":"n","queueName":"q","authentication":{"sasKeyName":"k","sasKey":"s"},"brokeredMessageProperties":{"timeToLive":"soon"}}}`), "action.serviceBusQueueMessage.brokeredMessageProperties.timeToLive", `invalid duration "soon"`},
		{"bad scheduledEnqueueTimeUtc", withAction(`{"type":"ServiceBusTopic","serviceBusTopicMessage":{"namespace":"n","topicPath":"t","authentication":{"sasKeyName":"k","sasKey":"s"},"brokeredMessageProperties":{"scheduledEnqueueTimeUtc":"noon"}}}`), "action.serviceBusTopicMessage.brokeredMessageProperties.scheduledEnqueueTimeUtc", `invalid date-time "noon"`},
	}
	v := newValidator(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for form, in := range map[string]string{"bare": tt.in, "wrapped": `{"properties":` + tt.in + `}`} {
				d, err := v.Decode([]byte(in))
				if d != nil {
					t.Errorf("%s: a definition was returned", form)
				}
				assertProblems(t, err, []Problem{{Path: tt.path, Message: tt.fragment}})
			}
		})
	}
}

// headers returns n JSON header members whose values are size characters long.
func headers(n, size int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"X-H%02d":"%s"`, i, strings.Repeat("v", size))
	}
	return strings.Join(parts, ",")
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct{ name, in string }{
		{"one-time", withAction(`{` + httpAction + `}`)},
		{"recurrence null", withRecurrence(`null`)},
		{"schedule null", withRecurrence(`{"frequency":"Day","schedule":null}`)},
		{"interval Second max", withRecurrence(`{"frequency":"Second","interval":9999999}`)},
		{"interval Minute max", withRecurrence(`{"frequency":"Minute","interval":1000}`)},
		{"interval Hour max", withRecurrence(`{"frequency":"Hour","interval":1000}`)},
		{"interval Day max", withRecurrence(`{"frequency":"Day","interval":548}`)},
		{"interval Week max", withRecurrence(`{"frequency":"Week","interval":78}`)},
		{"interval Month max", withRecurrence(`{"frequency":"Month","interval":18}`)},
		{"interval Year", withRecurrence(`{"frequency":"Year","interval":1}`)},
		{"interval 1.0", withRecurrence(`{"frequency":"Day","interval":1.0}`)},
		{"interval 2e1", withRecurrence(`{"frequency":"Day","interval":2e1}`)},
		{"monthDays bounds", withRecurrence(`{"frequency":"Month","schedule":{"monthDays":[1,31,-1,-31]}}`)},
		{"monthDays with Year", withRecurrence(`{"frequency":"Year","schedule":{"monthDays":[1],"months":[2,8]}}`)},
		{"months with Month", withRecurrence(`{"frequency":"Month","schedule":{"months":[1,7]}}`)},
		{"occurrence bounds", withRecurrence(`{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Monday","occurrence":5},{"day":"Friday","occurrence":-5},{"day":"Sunday"}]}}`)},
		{"union of days", withRecurrence(`{"frequency":"Month","schedule":{"monthDays":[10],"monthlyOccurrences":[{"day":"Monday","occurrence":1}]}}`)},
		{"scalars", withRecurrence(`{"frequency":"Day","schedule":{"hours":5,"minutes":0}}`)},
		{"duplicates", withRecurrence(`{"frequency":"Day","schedule":{"hours":[5,5]}}`)},
		{"count and endTime", withRecurrence(`{"frequency":"Day","count":5,"endTime":"2012-11-04"}`)},
		{"past endTime", withRecurrence(`{"frequency":"Day","endTime":"2000-01-01T00:00:00Z"}`)},
		{"windows zone", withRecurrence(`{"frequency":"Week","timeZone":"pacific standard time","schedule":{"weekDays":["monday"]}}`)},
		{"time forms", `{"startTime":"2012-08-04t00:00:00.1234567z",` + withRecurrence(`{"frequency":"Day","endTime":"2012-08-04T00:00+02:00"}`)[1:]},
		{"retryInterval TimeSpan", withAction(`{` + httpAction + `,"retryPolicy":{"retryType":"Fixed","retryInterval":"00:00:15","retryCount":20}}`)},
		{"retryInterval ISO", withAction(`{` + httpAction + `,"retryPolicy":{"retryType":"fixed","retryInterval":"PT1D","retryCount":0}}`)},
		{"retryInterval days", withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"548.00:00:00"}}`)},
		{"retry None", withAction(`{` + httpAction + `,"retryPolicy":{"retryType":"None"}}`)},
		{"authentication null", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","authentication":null}}`)},
		{"state Disabled", `{"state":"disabled","action":{` + httpAction + `}}`},
		{"50 headers", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"GET","headers":{` + headers(50, 1) + `}}}`)},
		{"body 8192", withAction(`{"type":"Http","request":{"uri":"http://localhost/","method":"POST","body":"` + strings.Repeat("b", 8192) + `"}}`)},
		{"uri 2048", withAction(`{"type":"Http","request":{"uri":"http://localhost/` + strings.Repeat("a", 2048-17) + `","method":"GET"}}`)},
		{"status ignored", `{"action":{` + httpAction + `},"status":{"executionCount":"lots"}}`},
		{"$schema", `{"$schema":"../job.schema.json","action":{` + httpAction + `}}`},
	}
	v := newValidator(t)
	for _, tt := range tests {
		for form, in := range map[string]string{"bare": tt.in, "wrapped": `{"id":"x","properties":` + tt.in + `}`} {
			if _, err := v.Decode([]byte(in)); err != nil {
				t.Errorf("%s (%s): %v", tt.name, form, err)
			}
		}
	}
}

func TestDecodeIsCaseInsensitive(t *testing.T) {
	mixed := `{"PROPERTIES":{"StartTime":"2024-01-01T09:00:00Z",
		"Action":{"TYPE":"http","REQUEST":{"Uri":"http://localhost:8080/","METHOD":"post","Headers":{"x-Custom":"Keep Me"}},
			"RetryPolicy":{"RetryType":"FIXED","RetryInterval":"pt1m","RetryCount":2}},
		"Recurrence":{"Frequency":"MONTH","Interval":2,
			"Schedule":{"Hours":5,"MonthlyOccurrences":[{"DAY":"friday","Occurrence":-1}]}},
		"State":"DISABLED"}}`
	canonical := `{"startTime":"2024-01-01T09:00:00Z",
		"action":{"type":"Http","request":{"uri":"http://localhost:8080/","method":"POST","headers":{"x-Custom":"Keep Me"}},
			"retryPolicy":{"retryType":"Fixed","retryInterval":"PT1M","retryCount":2}},
		"recurrence":{"frequency":"Month","interval":2,
			"schedule":{"hours":[5],"monthlyOccurrences":[{"day":"Friday","occurrence":-1}]}},
		"state":"Disabled"}`
	v := newValidator(t)
	d, err := v.Decode([]byte(mixed))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(d.Properties)
	var want any
	if err := json.Unmarshal([]byte(canonical), &want); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	var gotAny any
	_ = json.Unmarshal(got, &gotAny)
	gotJSON, _ := json.Marshal(gotAny)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("got  %s\nwant %s", gotJSON, wantJSON)
	}
}

func TestDecodeSamePathsWrappedOrBare(t *testing.T) {
	bare := withRecurrence(`{"frequency":"Week","interval":100,"schedule":{"monthDays":[0]}}`)
	v := newValidator(t)
	_, errBare := v.Decode([]byte(bare))
	_, errWrapped := v.Decode([]byte(`{"name":"j","Properties":` + bare + `}`))
	if errBare == nil || errWrapped == nil || errBare.Error() != errWrapped.Error() {
		t.Errorf("bare and wrapped differ:\n%v\n%v", errBare, errWrapped)
	}
}

func TestDecodeReportsEverythingAtOnce(t *testing.T) {
	in := `{"startTime":"soon","state":"Faulted",
		"action":{"type":"Http","request":{"uri":"ftp://x","method":"GET"},"retryPolicy":{"retryCount":99,"retryInterval":"00:00:01"}},
		"recurrence":{"frequency":"Day","interval":600,"timeZone":"Nowhere/Town","count":"3",
			"schedule":{"weekDays":["Monday"],"hours":[25],"minutes":[]}}}`
	_, err := newValidator(t).Decode([]byte(in))
	assertProblems(t, err, []Problem{
		{"startTime", "invalid date-time"},
		{"state", "cannot be set to Faulted"},
		{"action.request.uri", "http:// or https://"},
		{"action.retryPolicy.retryCount", "between 0 and 20"},
		{"action.retryPolicy.retryInterval", "at least 00:00:15"},
		{"recurrence.interval", "between 1 and 548 for frequency Day"},
		{"recurrence.timeZone", "unknown time zone"},
		{"recurrence.count", "not a string"},
		{"recurrence.schedule.weekDays", "only allowed with frequency Week"},
		{"recurrence.schedule.hours[0]", "between 0 and 23"},
		{"recurrence.schedule.minutes", "empty list"},
	})
	if want := "action.request.uri: must be an http:// or https:// URL; "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Error() = %q, want it to start with %q", err, want)
	}
}

func TestDecodeDocumentProblems(t *testing.T) {
	ok := withAction(`{` + httpAction + `}`)
	tests := []struct{ name, in, fragment string }{
		{"not JSON", `{"action":`, "not valid JSON"},
		{"syntax", `{"action" 1}`, "not valid JSON: invalid character '1' after object key (at byte"},
		{"trailing data", ok + ` {}`, "unexpected data after the JSON value"},
		{"array", `[` + ok + `]`, "must be a JSON object"},
		{"too large", ok + strings.Repeat(" ", MaxJobSize), "at most 16 KiB (16,384 bytes)"},
		{"properties not object", `{"properties":[]}`, "properties must be a JSON object"},
		{"properties twice", `{"properties":` + ok + `,"Properties":` + ok + `}`, "properties is given twice"},
		{"resource without properties", `{"name":"x"}`, "has no properties object"},
		{"unknown resource member", `{"properties":` + ok + `,"location":"x"}`, `unknown member "location"`},
		// az resource show writes these null (and resourceGroup a name): anything else is not its output.
		{"tags on a job", `{"properties":` + ok + `,"tags":{"a":"b"}}`, `unknown member "tags"`},
		{"resourceGroup not a name", `{"properties":` + ok + `,"resourceGroup":5}`, `unknown member "resourceGroup"`},
	}
	v := newValidator(t)
	for _, tt := range tests {
		d, err := v.Decode([]byte(tt.in))
		if d != nil {
			t.Errorf("%s: a definition was returned", tt.name)
		}
		ve, isVE := err.(*ValidationError)
		if !isVE || len(ve.Problems) != 1 || ve.Problems[0].Path != "" || !strings.Contains(ve.Problems[0].Message, tt.fragment) {
			t.Errorf("%s: got %v, want one document problem containing %q", tt.name, err, tt.fragment)
		}
	}
	exact := ok + strings.Repeat(" ", MaxJobSize-len(ok))
	if _, err := v.Decode([]byte(exact)); err != nil {
		t.Errorf("a job of exactly 16 KiB was refused: %v", err)
	}
}

// TestAMissingSecretSaysWhy: a job read (its secrets left out) and put back whole is refused
// with the reason and the way out, not only "is required".
func TestAMissingSecretSaysWhy(t *testing.T) {
	_, err := newValidator(t).Decode([]byte(withAction(`{"type":"ServiceBusQueue","serviceBusQueueMessage":{"namespace":"n","queueName":"q",
		"authentication":{"type":"SharedAccessKey","sasKeyName":"k"}}}`)))
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Problems) != 1 || ve.Problems[0].Path != "action.serviceBusQueueMessage.authentication.sasKey" ||
		!strings.Contains(ve.Problems[0].Message, "is required (secrets are never answered, so a job read and put back must give its secrets again; a PATCH keeps them)") {
		t.Errorf("got %v", err)
	}
}

// TestDecodeTakesANameGivenTwiceWithOneValue: what the gateway answers (a monthly occurrence's
// count as "occurrence" and "Occurrence") is accepted when put back as it was read.
func TestDecodeTakesANameGivenTwiceWithOneValue(t *testing.T) {
	d, err := newValidator(t).Decode([]byte(`{"action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},
		"recurrence":{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Friday","occurrence":-1,"Occurrence":-1}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if occ := d.Properties.Recurrence.Schedule.MonthlyOccurrences; len(occ) != 1 || occ[0].Occurrence != -1 {
		t.Errorf("monthly occurrences %+v, want the last Friday", occ)
	}
}

func TestDecodeDropsReadOnlyFields(t *testing.T) {
	in := `{"id":"i","type":"t","name":"n","properties":{"action":{"type":"Https","request":{"uri":"https://localhost/","method":"GET",
		"authentication":{"type":"ClientCertificate","pfx":"UEZY","password":"pw","certificateThumbprint":"77ED","certificateExpiration":"2021-01-01T07:00:00Z"}}},
		"status":{"executionCount":3}}}`
	d, err := newValidator(t).Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	auth := d.Properties.Action.Request.Authentication
	if d.ID != "" || d.Name != "" || d.Properties.Status != nil || auth.CertificateThumbprint != "" || auth.CertificateExpiration != "" {
		t.Errorf("read-only fields kept: %+v %+v", d, auth)
	}
	if auth.Pfx != "UEZY" || auth.Password != "pw" {
		t.Error("secrets the worker needs were dropped")
	}
}

func TestDecodeRetryIntervalForms(t *testing.T) {
	v := newValidator(t)
	for in, want := range map[string]time.Duration{
		"00:00:30": 30 * time.Second, "PT30S": 30 * time.Second, "PT1D": 24 * time.Hour,
		"P1DT2H": 26 * time.Hour, "1.02:03:04": 26*time.Hour + 3*time.Minute + 4*time.Second, "pt15s": 15 * time.Second,
	} {
		d, err := v.Decode([]byte(withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"` + in + `"}}`)))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := d.Properties.Action.RetryPolicy.Interval(); got != want {
			t.Errorf("%s: interval %v, want %v", in, got, want)
		}
	}
}

func TestWithMinRetryInterval(t *testing.T) {
	v, err := New(WithMinRetryInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Decode([]byte(withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"00:30:00"}}`)))
	assertProblems(t, err, []Problem{{"action.retryPolicy.retryInterval", "must be at least 01:00:00 (1 hour)"}})
	if _, err := v.Decode([]byte(withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"PT1H"}}`))); err != nil {
		t.Error(err)
	}
}

func TestPackageLevelDecode(t *testing.T) {
	d, err := Decode([]byte(withRecurrence(`{"frequency":"week","schedule":{"weekDays":["MONDAY"]}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if r := d.Properties.Recurrence; r.Frequency != job.Week || r.Schedule.WeekDays[0] != 1 {
		t.Errorf("decoded %+v", r)
	}
}

// A UTF-8 byte-order mark before the JSON, as a file saved by a Windows tool has, is ignored
// (RFC 8259 §8.1 allows it); one anywhere else is refused as JSON refuses it.
func TestAByteOrderMarkIsIgnored(t *testing.T) {
	v := newValidator(t)
	def := withRecurrence(`{"frequency":"hour"}`)
	for _, in := range []string{"\ufeff" + def, "\ufeff" + `{"properties": ` + def + `}`} {
		d, err := v.Decode([]byte(in))
		if err != nil {
			t.Fatalf("%.30q: %v", in, err)
		}
		if d.Properties.Recurrence.Frequency != job.Hour {
			t.Errorf("%.30q: decoded %+v", in, d.Properties.Recurrence)
		}
	}
	if _, err := v.DecodeCollection([]byte("\ufeff" + `{"quota": {"maxJobCount": 5}}`)); err != nil {
		t.Errorf("a collection with a byte-order mark: %v", err)
	}
	for _, in := range []string{"\ufeff\ufeff" + def, " \ufeff" + def} {
		if _, err := v.Decode([]byte(in)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("%.30q: %v, want not valid JSON", in, err)
		}
	}
}

// Invalid UTF-8 is refused with the path of the text that holds it: Go's decoder would have
// replaced it with U+FFFD and the target would get other bytes than the client sent.
func TestInvalidUTF8IsRefusedWithItsPath(t *testing.T) {
	v := newValidator(t)
	const head = `{"action":{"type":"Http","request":{"uri":"http://x/","method":"POST",`
	for _, c := range []struct{ doc, path string }{
		{head + "\"body\":\"caf\xe9\"}}}", "action.request.body"},
		{`{"properties":` + head + "\"body\":\"caf\xe9\"}}}}", "action.request.body"},
		{head + "\"headers\":{\"X-A\":\"ok\",\"X-B\":\"\xff\"}}}}", `action.request.headers["X-B"]`},
		{head + "\"headers\":{\"X-\xff\":\"v\"}}}}", "action.request.headers"},
		{`{"recurrence":{"frequency":"Day","schedule":{"weekDays":["Monday","T` + "\xc3" + `"]}},` + head[1:] + `"body":"x"}}}`, "recurrence.schedule.weekDays[1]"},
	} {
		_, err := v.Decode([]byte(c.doc))
		var verr *ValidationError
		if !errors.As(err, &verr) || len(verr.Problems) != 1 || verr.Problems[0].Path != c.path ||
			!strings.Contains(verr.Problems[0].Message, "not valid UTF-8") {
			t.Errorf("%q: got %v, want one problem at %s", c.doc, err, c.path)
		}
	}
}

// An error about a secret names its field but never quotes its value, whatever its wrong type.
func TestAnErrorNeverQuotesASecret(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	auth := func(a string) string {
		return `{"properties":{"action":{"type":"Http","request":{"uri":"https://x.example/","method":"GET","authentication":` + a + `}},"recurrence":{"frequency":"Hour"}}}`
	}
	for in, path := range map[string]string{
		auth(`{"type":"Basic","username":"u","password":987654321}`):                                                                                                                   "action.request.authentication.password",
		auth(`{"type":"ClientCertificate","pfx":987654321,"password":"p"}`):                                                                                                            "action.request.authentication.pfx",
		auth(`{"type":"ActiveDirectoryOAuth","tenant":"t","audience":"a","clientId":"c","secret":987654321}`):                                                                          "action.request.authentication.secret",
		`{"properties":{"action":{"type":"Http","request":{"uri":"https://x.example/","method":"GET","headers":{"authorization":987654321}}},"recurrence":{"frequency":"Hour"}}}`:      "action.request.headers.authorization",
		`{"properties":{"action":{"type":"StorageQueue","queueMessage":{"storageAccount":"a","queueName":"q","sasToken":987654321,"message":"m"}},"recurrence":{"frequency":"Hour"}}}`: "action.queueMessage.sasToken",
		`{"properties":{"action":{"type":"Http","request":{"uri":"https://x.example/","method":"GET"},"errorAction":{"type":"ServiceBusTopic","serviceBusTopicMessage":{"namespace":"n","topicPath":"t","message":"m","transportType":"AMQP","authentication":{"type":"SharedAccessKey","sasKeyName":"k","sasKey":987654321}}}},"recurrence":{"frequency":"Hour"}}}`: "action.errorAction.serviceBusTopicMessage.authentication.sasKey",
	} {
		_, err := v.Decode([]byte(in))
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v; want one naming %s", path, err, path)
			continue
		}
		if strings.Contains(err.Error(), "987654321") {
			t.Errorf("%s: the error quotes the secret: %v", path, err)
		}
	}
	// Elsewhere a number is still quoted: it helps and hides nothing.
	_, err = v.Decode([]byte(`{"properties":{"action":{"type":"Http","request":{"uri":"https://x.example/","method":"GET"}},"recurrence":{"frequency":"Hour","interval":1.5}}}`))
	if err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Errorf("interval 1.5: %v; want the number quoted", err)
	}
}

// Credentials in a URL would rest and be answered in clear: they are refused, without being
// quoted, for the action and the error action alike.
func TestAURLWithCredentialsIsRefused(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for uri, ok := range map[string]bool{
		"https://svc:s3cret@hooks.example/x": false,
		"https://s3cret@hooks.example/x":     false,
		"https://hooks.example/x?a=b@c":      true,
		"https://hooks.example/x/@me":        true,
	} {
		for _, where := range []string{"action", "errorAction"} {
			req := `{"uri":"` + uri + `","method":"POST"}`
			action := `{"type":"Http","request":` + req + `}`
			if where == "errorAction" {
				action = `{"type":"Http","request":{"uri":"https://hooks.example/","method":"GET"},"errorAction":{"type":"Http","request":` + req + `}}`
			}
			_, err := v.Decode([]byte(`{"properties":{"action":` + action + `,"recurrence":{"frequency":"Hour"}}}`))
			switch {
			case ok && err != nil:
				t.Errorf("%s in %s: %v; want it accepted", uri, where, err)
			case !ok && (err == nil || !strings.Contains(err.Error(), "request.uri: must not hold a user name or password")):
				t.Errorf("%s in %s: %v; want the uri refused for its credentials", uri, where, err)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Errorf("%s in %s: the error quotes the secret: %v", uri, where, err)
			}
		}
	}
}

// A secret header or query key given empty is refused: the API answers secrets empty, so a
// client that puts back what it read would store the key as "" and its target be refused.
func TestAnEmptySecretIsRefused(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for req, want := range map[string]string{
		`{"uri":"https://fn.example/api/x?code=","method":"POST"}`:                             "request.uri: the query's code is empty",
		`{"uri":"https://fn.example/api/x?a=1&SIG=&b=2","method":"POST"}`:                      "request.uri: the query's SIG is empty",
		`{"uri":"https://fn.example/","method":"POST","headers":{"x-functions-key":""}}`:       `request.headers["x-functions-key"]: must not be empty`,
		`{"uri":"https://fn.example/","method":"POST","headers":{"Authorization":""}}`:         "request.headers.Authorization: must not be empty",
		`{"uri":"https://fn.example/?code=k&other=","method":"POST","headers":{"X-Other":""}}`: "",
	} {
		_, err := v.Decode([]byte(`{"properties":{"action":{"type":"Http","request":` + req + `}}}`))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v; want it accepted", req, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v; want %q", req, err, want)
		}
	}
}

// A preview takes a schedule alone; a put still needs the action, and a preview checks one
// that is given, whatever the case of its name.
func TestDecodeToPreviewWithoutAction(t *testing.T) {
	schedule := `{"Properties":{"startTime":"2024-01-31T09:00:00Z","recurrence":{"frequency":"Month"}}}`
	if _, err := Decode([]byte(schedule)); err == nil || !strings.Contains(err.Error(), "action") {
		t.Fatalf("Decode of a job without action: %v, want the action required", err)
	}
	d, err := DecodeToPreview([]byte(schedule))
	if err != nil || d.Properties.Recurrence == nil || d.Properties.StartTime == nil {
		t.Fatalf("DecodeToPreview of a schedule alone: %+v, %v", d, err)
	}
	var verr *ValidationError
	_, err = DecodeToPreview([]byte(`{"Action":{"type":"Http","request":{"uri":"ftp://x/","method":"GET"}}}`))
	if !errors.As(err, &verr) || len(verr.Problems) != 1 || verr.Problems[0].Path != "action.request.uri" {
		t.Fatalf("DecodeToPreview of a bad action: %v, want its uri named alone", err)
	}
}
