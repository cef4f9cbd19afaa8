package jobschema

import (
	"encoding/json"
	"fmt"
)

// The job schema states its conditional rules (what an action of each type requires and
// forbids, the fields each authentication type requires, the interval range and the schedule
// fields of each frequency) with allOf lists of if/then subschemas. They are three quarters
// of the validator's work on a common job (58 µs of 73 µs with a Basic authentication), since
// the validator evaluates every if. A valid job is so checked in two cheaper steps: the schema
// without those lists (compiled once, in New), then the same rules in Go, below. Only when
// either step fails does the whole schema run, to say what is wrong in its words: the messages
// stay the schema's, and the Go rules need only be at least as strict as the lists they
// stand for (TestConditionsAreAsStrictAsTheSchema and FuzzDecode check they are).

// conditionalDefs are the definitions of job.schema.json whose allOf lists the Go rules below
// replace on the way to accepting a job.
var conditionalDefs = []string{"recurrence", "actionBase", "httpAuthentication"}

// unconditional returns a copy of the job schema document without the allOf lists of
// conditionalDefs, under its own id.
func unconditional(doc any, id string) (any, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var cp map[string]any
	if err := json.Unmarshal(raw, &cp); err != nil {
		return nil, err
	}
	cp["$id"] = id
	defs, _ := cp["$defs"].(map[string]any)
	for _, name := range conditionalDefs {
		def, ok := defs[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("the job schema has no definition %s", name)
		}
		delete(def, "allOf")
	}
	return cp, nil
}

// conditionsHold reports whether a job's canonical properties, valid against the schema
// without its conditional lists, meet those lists' rules too. False means only "maybe not":
// the whole schema then decides.
func conditionsHold(props map[string]any) bool {
	if r, ok := props["recurrence"].(map[string]any); ok && !recurrenceHolds(r) {
		return false
	}
	a, ok := props["action"].(map[string]any)
	if !ok || !actionHolds(a) {
		return false
	}
	if e, ok := a["errorAction"].(map[string]any); ok && !actionHolds(e) {
		return false
	}
	return true
}

// intervalMax is the largest interval of each frequency (the schema's intervalFor).
var intervalMax = map[string]float64{"Second": 9999999, "Minute": 1000, "Hour": 1000, "Day": 548, "Week": 78, "Month": 18, "Year": 1}

func recurrenceHolds(r map[string]any) bool {
	freq, _ := r["frequency"].(string)
	max, known := intervalMax[freq]
	if !known {
		return false
	}
	if iv, present := r["interval"]; present {
		n, ok := iv.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		if err != nil || f > max {
			return false
		}
	}
	s, ok := r["schedule"].(map[string]any)
	if !ok {
		return true
	}
	if _, has := s["weekDays"]; has && freq != "Week" {
		return false
	}
	monthOrYear := freq == "Month" || freq == "Year"
	for _, k := range []string{"monthDays", "monthlyOccurrences", "months"} {
		if _, has := s[k]; has && !monthOrYear {
			return false
		}
	}
	return true
}

// payloadOf is the one payload member an action of each type has.
var payloadOf = map[string]string{"Http": "request", "Https": "request", "StorageQueue": "queueMessage",
	"ServiceBusQueue": "serviceBusQueueMessage", "ServiceBusTopic": "serviceBusTopicMessage"}

func actionHolds(a map[string]any) bool {
	t, _ := a["type"].(string)
	want, known := payloadOf[t]
	if !known {
		return false
	}
	for _, p := range []string{"request", "queueMessage", "serviceBusQueueMessage", "serviceBusTopicMessage"} {
		if _, has := a[p]; has != (p == want) {
			return false
		}
	}
	if req, ok := a["request"].(map[string]any); ok {
		if auth, ok := req["authentication"].(map[string]any); ok && !authenticationHolds(auth) {
			return false
		}
	}
	return true
}

// authRequires is what each authentication type requires beside its type.
var authRequires = map[string][]string{
	"NotSpecified":         nil,
	"Basic":                {"username", "password"},
	"ClientCertificate":    {"pfx", "password"},
	"ActiveDirectoryOAuth": {"tenant", "audience", "clientId", "secret"},
}

func authenticationHolds(auth map[string]any) bool {
	t, _ := auth["type"].(string)
	required, known := authRequires[t]
	if !known {
		return false
	}
	for _, k := range required {
		if _, has := auth[k]; !has {
			return false
		}
	}
	return true
}
