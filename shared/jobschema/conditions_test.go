package jobschema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/resched/resched/schemas"
)

// canonicalJob is what Decode validates: the canonical properties of raw, or false when raw
// does not get that far.
func canonicalJob(v *Validator, raw []byte) (any, bool) {
	probs := &problems{}
	tree, ok := parse(raw, "job", probs)
	if !ok {
		return nil, false
	}
	props := unwrap(tree, probs)
	if props == nil || !checkNumbers(props, "", probs) {
		return nil, false
	}
	return (&canonicaliser{probs: probs}).value(v.job, props), true
}

// conditionCases break one conditional rule of the schema each, and nothing else: the schema
// without its conditional lists takes every one of them.
var conditionCases = map[string]string{
	"interval Second":                  withRecurrence(`{"frequency":"Second","interval":10000000}`),
	"interval Minute":                  withRecurrence(`{"frequency":"Minute","interval":1001}`),
	"interval Hour":                    withRecurrence(`{"frequency":"Hour","interval":1001}`),
	"interval Day":                     withRecurrence(`{"frequency":"Day","interval":549}`),
	"interval Week":                    withRecurrence(`{"frequency":"Week","interval":79}`),
	"interval Month":                   withRecurrence(`{"frequency":"Month","interval":19}`),
	"interval Year":                    withRecurrence(`{"frequency":"Year","interval":2}`),
	"weekDays with Day":                withRecurrence(`{"frequency":"Day","schedule":{"weekDays":["Monday"]}}`),
	"monthDays with Week":              withRecurrence(`{"frequency":"Week","schedule":{"monthDays":[1]}}`),
	"months with Hour":                 withRecurrence(`{"frequency":"Hour","schedule":{"months":[1]}}`),
	"monthlyOccurrences with Day":      withRecurrence(`{"frequency":"Day","schedule":{"monthlyOccurrences":[{"day":"Monday"}]}}`),
	"Http without request":             withAction(`{"type":"Http"}`),
	"Https with a queue message":       withAction(`{` + httpAction + `,"queueMessage":{"storageAccount":"a","queueName":"q1q","sasToken":"s","message":"m"}}`),
	"StorageQueue without its message": withAction(`{"type":"StorageQueue"}`),
	"StorageQueue with a request": withAction(`{"type":"StorageQueue","request":{"uri":"http://x/","method":"GET"},` +
		`"queueMessage":{"storageAccount":"a","queueName":"q1q","sasToken":"s","message":"m"}}`),
	"ServiceBusQueue without its message": withAction(`{"type":"ServiceBusQueue"}`),
	"ServiceBusTopic with a queue message": withAction(`{"type":"ServiceBusTopic","serviceBusQueueMessage":{"namespace":"n","queueName":"q",` +
		`"authentication":{"type":"SharedAccessKey","sasKeyName":"k","sasKey":"s"}}}`),
	"errorAction Http without request": withAction(`{` + httpAction + `,"errorAction":{"type":"Http"}}`),
	"Basic without password": withAction(`{"type":"Https","request":{"uri":"https://x/","method":"GET",` +
		`"authentication":{"type":"Basic","username":"u"}}}`),
	"ClientCertificate without pfx": withAction(`{"type":"Https","request":{"uri":"https://x/","method":"GET",` +
		`"authentication":{"type":"ClientCertificate","password":"p"}}}`),
	"ActiveDirectoryOAuth without secret": withAction(`{"type":"Https","request":{"uri":"https://x/","method":"GET",` +
		`"authentication":{"type":"ActiveDirectoryOAuth","tenant":"t","audience":"a","clientId":"c"}}}`),
}

// The Go rules are at least as strict as the conditional lists they stand for: a job they
// and the unconditional schema accept, the whole schema accepts. (The converse is not needed:
// whatever they refuse, the whole schema judges.)
func TestConditionsAreAsStrictAsTheSchema(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{}
	for name, in := range conditionCases {
		inputs[name] = []byte(in)
	}
	for _, dir := range []string{"examples", "examples/invalid"} {
		for _, name := range exampleFiles(t, dir) {
			raw, err := schemas.FS.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			inputs[name] = raw
		}
	}
	for name, raw := range inputs {
		canon, ok := canonicalJob(v, raw)
		if !ok {
			continue
		}
		full := v.job.Validate(canon) == nil
		if v.jobHolds(canon) && !full {
			t.Errorf("%s: the cheap check accepts what the schema refuses", name)
		}
		if _, isCase := conditionCases[name]; isCase {
			if full {
				t.Errorf("%s: the schema accepts it; the case breaks no rule", name)
			}
			if v.jobPlain.Validate(canon) != nil {
				t.Errorf("%s: the schema without its conditions refuses it already; it does not test a Go rule", name)
			}
		}
	}
}

// Every conditional of the job schema is one the Go rules replace: a new if, oneOf or
// dependent keyword in the schema must come with its rule in conditions.go.
func TestUnconditionalSchemaHasNoConditions(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := unconditional(v.docs[schemas.JobID], plainJobID)
	if err != nil {
		t.Fatal(err)
	}
	root := plain.(map[string]any)
	// What validating jobProperties reaches, following local references.
	resolve := func(ref string) any {
		var n any = root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			n = n.(map[string]any)[part]
		}
		return n
	}
	seen := map[string]bool{}
	var walk func(at string, n any)
	walk = func(at string, n any) {
		switch n := n.(type) {
		case map[string]any:
			for k, c := range n {
				switch k {
				case "if", "then", "else", "allOf", "anyOf", "oneOf", "dependentRequired", "dependentSchemas":
					if !strings.HasSuffix(at, "/properties") { // a property of that name is no keyword
						t.Errorf("%s/%s: a conditional the Go rules (conditions.go) do not stand for", at, k)
					}
				case "$ref":
					if ref, ok := c.(string); ok && strings.HasPrefix(ref, "#/") && !seen[ref] {
						seen[ref] = true
						walk(ref, resolve(ref))
					}
				}
				walk(at+"/"+k, c)
			}
		case []any:
			for _, c := range n {
				walk(at+"/[]", c)
			}
		}
	}
	walk("#/$defs/jobProperties", resolve("#/$defs/jobProperties"))
	if !seen["#/$defs/httpAuthentication"] {
		t.Error("the walk did not reach httpAuthentication: it does not follow references")
	}
}

// Every combination the conditional lists judge (frequency × interval × schedule fields; action
// type × payloads present, in the action and in the error action; authentication type × the
// fields given): the cheap way accepts exactly what the whole schema accepts.
func TestConditionsAgreeWithTheSchemaOnEveryCombination(t *testing.T) {
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	check := func(name, raw string) {
		t.Helper()
		canon, ok := canonicalJob(v, []byte(raw))
		if !ok {
			t.Fatalf("%s: does not parse: %s", name, raw)
		}
		cheap, full := v.jobHolds(canon), v.job.Validate(canon) == nil
		if cheap && !full {
			t.Errorf("%s: the cheap way accepts what the schema refuses: %s", name, raw)
		}
		if full && !cheap {
			t.Errorf("%s: the schema accepts what the cheap way sends to it (correct, but slow): %s", name, raw)
		}
	}
	scheduleFields := []string{`"weekDays":["Monday"]`, `"monthDays":[1]`, `"monthlyOccurrences":[{"day":"Monday"}]`, `"months":[1]`}
	for freq, max := range intervalMax {
		for _, interval := range []int{1, int(max), int(max) + 1} {
			for set := range 1 << len(scheduleFields) {
				var fields []string
				for i, f := range scheduleFields {
					if set&(1<<i) != 0 {
						fields = append(fields, f)
					}
				}
				rec := fmt.Sprintf(`{"frequency":%q,"interval":%d`, freq, interval)
				if len(fields) > 0 {
					rec += `,"schedule":{` + strings.Join(fields, ",") + `}`
				}
				check(fmt.Sprintf("%s/%d/%v", freq, interval, fields), withRecurrence(rec+`}`))
			}
		}
	}
	payloads := map[string]string{
		"request":      `{"uri":"http://x/","method":"GET"}`,
		"queueMessage": `{"storageAccount":"a","queueName":"q1q","sasToken":"s","message":"m"}`,
		"serviceBusQueueMessage": `{"namespace":"n","queueName":"q",` +
			`"authentication":{"type":"SharedAccessKey","sasKeyName":"k","sasKey":"s"}}`,
		"serviceBusTopicMessage": `{"namespace":"n","topicPath":"t",` +
			`"authentication":{"type":"SharedAccessKey","sasKeyName":"k","sasKey":"s"}}`,
	}
	keys := []string{"request", "queueMessage", "serviceBusQueueMessage", "serviceBusTopicMessage"}
	for typ := range payloadOf {
		for set := range 1 << len(keys) {
			action := fmt.Sprintf(`{"type":%q`, typ)
			for i, k := range keys {
				if set&(1<<i) != 0 {
					action += fmt.Sprintf(`,%q:%s`, k, payloads[k])
				}
			}
			action += `}`
			check("action "+action, withAction(action))
			check("errorAction "+action, withAction(`{`+httpAction+`,"errorAction":`+action+`}`))
		}
	}
	authFields := map[string]string{"username": "u", "password": "p", "pfx": "UEZY", "tenant": "t", "audience": "a", "clientId": "c", "secret": "s"}
	for typ, required := range authRequires {
		for skip := -1; skip < len(required); skip++ { // all given, then each one missing
			auth := fmt.Sprintf(`{"type":%q`, typ)
			for i, f := range required {
				if i != skip {
					auth += fmt.Sprintf(`,%q:%q`, f, authFields[f])
				}
			}
			auth += `}`
			check("authentication "+auth, withAction(`{"type":"Https","request":{"uri":"https://x/","method":"GET","authentication":`+auth+`}}`))
		}
	}
}
