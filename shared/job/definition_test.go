package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// secretJob holds one distinct, recognisable value in every secret field of the model.
const secretJob = `{
  "properties": {
    "startTime": "2024-01-01T12:00:00Z",
    "action": {
      "type": "Https",
      "request": {
        "uri": "https://localhost:8443/hook?a=1&code=SECRET-CODE&empty=&Sig=SECRET-SIG#frag", "method": "POST",
        "headers": {"Content-Type": "application/json", "authorization": "Bearer SECRET-HEADER", "x-functions-key": "SECRET-FUNCTION-KEY", "api-key": "SECRET-AZURE-API-KEY"}, "body": "{}",
        "authentication": {"type": "ClientCertificate", "pfx": "SECRET-PFX", "password": "SECRET-CERT-PASSWORD"}
      },
      "retryPolicy": {"retryType": "Fixed", "retryInterval": "00:01:00", "retryCount": 3},
      "errorAction": {
        "type": "StorageQueue",
        "queueMessage": {"storageAccount": "acct", "queueName": "errors", "sasToken": "SECRET-SAS", "message": "failed"}
      }
    },
    "recurrence": {"frequency": "Week", "schedule": {"weekDays": ["Monday"], "hours": [10]}},
    "state": "Enabled"
  }
}`

var secretValues = []string{"SECRET-HEADER", "SECRET-AZURE-API-KEY", "SECRET-FUNCTION-KEY", "SECRET-CODE", "SECRET-SIG", "SECRET-APIKEY", "SECRET-PFX", "SECRET-CERT-PASSWORD", "SECRET-SAS", "SECRET-BASIC", "SECRET-OAUTH", "SECRET-SBKEY"}

// secretDefinition returns secretJob plus the secrets that cannot share one action.
func secretDefinition(t *testing.T) *Definition {
	t.Helper()
	d, err := DecodeDefinition([]byte(secretJob))
	if err != nil {
		t.Fatal(err)
	}
	basic := &ErrorAction{ActionSpec{Type: ActionHTTP, Request: &HTTPRequest{
		URI: "http://localhost:8080/?api-key=SECRET-APIKEY", Method: "GET",
		Authentication: &HTTPAuthentication{Type: AuthBasic, Username: "u", Password: "SECRET-BASIC"},
	}}}
	oauth := &HTTPAuthentication{Type: AuthActiveDirectoryOAuth, Tenant: "t", Audience: "a", ClientID: "c", Secret: "SECRET-OAUTH"}
	sb := &ServiceBusQueueMessage{ServiceBusMessage: ServiceBusMessage{
		Namespace: "ns", Authentication: &ServiceBusAuthentication{Type: ServiceBusAuthSharedAccessKey, SASKeyName: "k", SASKey: "SECRET-SBKEY"},
	}, QueueName: "q"}
	// Fields of other payloads are set too: Redacted must clear secrets wherever they are.
	d.Properties.Action.ErrorAction.Request = basic.Request
	d.Properties.Action.ServiceBusQueueMessage = sb
	d.Properties.Action.ErrorAction.ServiceBusTopicMessage = &ServiceBusTopicMessage{ServiceBusMessage: sb.ServiceBusMessage, TopicPath: "t"}
	d.Properties.Action.Request.Authentication.Secret = oauth.Secret
	return d
}

func TestRedactedHidesEverySecret(t *testing.T) {
	d := secretDefinition(t)
	before, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secretValues {
		if !bytes.Contains(before, []byte(s)) {
			t.Fatalf("test setup: %s missing from the unredacted definition", s)
		}
	}

	out, err := json.Marshal(d.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secretValues {
		if bytes.Contains(out, []byte(s)) {
			t.Errorf("redacted JSON contains %s: %s", s, out)
		}
	}
	if !bytes.Contains(out, []byte(`"username":"u"`)) || !bytes.Contains(out, []byte(`"sasKeyName":"k"`)) {
		t.Errorf("redaction removed non-secret fields: %s", out)
	}

	after, _ := json.Marshal(d)
	if !bytes.Equal(before, after) {
		t.Error("Redacted changed the original definition")
	}
}

func TestRedactedIsADeepCopy(t *testing.T) {
	d := secretDefinition(t)
	r := d.Redacted()
	r.Properties.Action.Request.Headers["X-Changed"] = "1"
	r.Properties.Recurrence.Schedule.Hours[0] = 23
	*r.Properties.Action.RetryPolicy.RetryCount = 20
	r.Properties.Action.ServiceBusQueueMessage.Namespace = "changed"
	if _, ok := d.Properties.Action.Request.Headers["X-Changed"]; ok {
		t.Error("headers are shared")
	}
	if d.Properties.Recurrence.Schedule.Hours[0] != 10 {
		t.Error("schedule is shared")
	}
	if *d.Properties.Action.RetryPolicy.RetryCount != 3 {
		t.Error("retry policy is shared")
	}
	if d.Properties.Action.ServiceBusQueueMessage.Namespace != "ns" {
		t.Error("service bus message is shared")
	}
}

func TestPrintingAndLoggingHideSecrets(t *testing.T) {
	d := secretDefinition(t)
	a := d.Properties.Action
	var printed []string
	for _, v := range []any{d, *d, &d.Properties, d.Properties, a, *a, a.ErrorAction, a.ActionSpec,
		a.Request, a.Request.Authentication, a.ErrorAction.QueueMessage, a.ServiceBusQueueMessage,
		a.ErrorAction.ServiceBusTopicMessage, a.ServiceBusQueueMessage.Authentication} {
		printed = append(printed, fmt.Sprint(v), fmt.Sprintf("%v %+v %s", v, v, v))
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		slog.New(h).Info("job", "def", d, "props", d.Properties, "action", a, "error", a.ErrorAction,
			"request", a.Request, "queue", a.ErrorAction.QueueMessage, "sb", a.ServiceBusQueueMessage)
	}
	printed = append(printed, logs.String())
	all := strings.Join(printed, "\n")
	for _, s := range secretValues {
		if strings.Contains(all, s) {
			t.Errorf("%s was printed or logged", s)
		}
	}
	if !strings.Contains(logs.String(), `"def":{"properties":{"startTime":"2024-01-01T12:00:00Z"`) {
		t.Errorf("the JSON handler did not log the definition as JSON: %s", logs.String())
	}
}

func TestDecodeDefinitionBothShapes(t *testing.T) {
	bare := `{"Action":{"TYPE":"http","Request":{"URI":"http://localhost:8080/","Method":"GET"}},
		"Recurrence":{"Frequency":"MONTH","Schedule":{"MonthlyOccurrences":[{"Day":"friday","Occurrence":-1}]}},
		"STATE":"disabled"}`
	for name, in := range map[string]string{"bare": bare, "wrapped": `{"Properties":` + bare + `}`} {
		d, err := DecodeDefinition([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, _ := json.Marshal(d.Properties)
		want := `{"action":{"type":"Http","request":{"uri":"http://localhost:8080/","method":"GET"}},` +
			`"recurrence":{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Friday","occurrence":-1}]}},` +
			`"state":"Disabled"}`
		if string(out) != want {
			t.Errorf("%s:\n got %s\nwant %s", name, out, want)
		}
	}
	if _, err := DecodeDefinition([]byte(`[1]`)); err == nil {
		t.Error("an array was accepted as a job")
	}
}

func TestEnumsAreCaseInsensitiveAndCanonical(t *testing.T) {
	tests := []struct {
		in   string
		dst  any
		want string
	}{
		{`"enabled"`, new(State), `"Enabled"`},
		{`"FAULTED"`, new(State), `"Faulted"`},
		{`"storagequeue"`, new(ActionType), `"StorageQueue"`},
		{`"HTTPS"`, new(ActionType), `"Https"`},
		{`"fixed"`, new(RetryType), `"Fixed"`},
		{`"NONE"`, new(RetryType), `"None"`},
		{`"basic"`, new(AuthType), `"Basic"`},
		{`"activedirectoryoauth"`, new(AuthType), `"ActiveDirectoryOAuth"`},
		{`"netMessaging"`, new(TransportType), `"NetMessaging"`},
		{`"amqp"`, new(TransportType), `"AMQP"`},
		{`"sharedAccessKey"`, new(ServiceBusAuthType), `"SharedAccessKey"`},
		{`"p10premium"`, new(SkuName), `"P10Premium"`},
		{`"suspended"`, new(CollectionState), `"Suspended"`},
		{`"erroraction"`, new(ActionName), `"ErrorAction"`},
		{`"postponed"`, new(ExecutionStatus), `"Postponed"`},
		// Escaped text takes the full decoder rather than the plain-string shortcut.
		{`"\u0057eek"`, new(Frequency), `"Week"`},
		{`"Mon\u0064ay"`, new(Weekday), `"Monday"`},
		{`"2026-03-01T12:00:00\u005a"`, new(DateTime), `"2026-03-01T12:00:00Z"`},
		{`"2026-03-01T12:00:00"`, new(DateTime), `"2026-03-01T12:00:00"`},
	}
	for _, tt := range tests {
		if err := json.Unmarshal([]byte(tt.in), tt.dst); err != nil {
			t.Errorf("%s into %T: %v", tt.in, tt.dst, err)
			continue
		}
		out, _ := json.Marshal(tt.dst)
		if string(out) != tt.want {
			t.Errorf("%s into %T wrote %s, want %s", tt.in, tt.dst, out, tt.want)
		}
	}
	for _, dst := range []any{new(State), new(ActionType), new(RetryType), new(SkuName)} {
		if err := json.Unmarshal([]byte(`"bogus"`), dst); err == nil || !strings.Contains(err.Error(), "must be one of") {
			t.Errorf("%T accepted an unknown value (err %v)", dst, err)
		}
	}
	for _, in := range []string{`5`, `"a\"b"`, `"Week`, `"Wéek"`} {
		var f Frequency
		if err := f.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("Frequency.UnmarshalJSON(%s) = %v, want an error", in, f)
		}
	}
}

func TestStateClientSettable(t *testing.T) {
	for s, want := range map[State]bool{"": true, StateEnabled: true, StateDisabled: true, StateCompleted: false, StateFaulted: false} {
		if got := s.ClientSettable(); got != want {
			t.Errorf("%q.ClientSettable() = %v, want %v", s, got, want)
		}
	}
}
