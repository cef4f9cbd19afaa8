package bus

import (
	"encoding/json"
	"fmt"

	"github.com/resched/resched/shared/job"
)

// DecodeAction reads a due occurrence's action as json.Unmarshal reads it into a job.Action.
// The layout json.Marshal writes (the planner stores actions so) of an HTTP action without
// authentication or error action, the common one, is read directly: encoding/json spent
// most of a worker's reading of a due message on the action. Any other JSON goes to
// encoding/json, and a fuzz target checks that both read the same.
func DecodeAction(data []byte) (*job.Action, error) {
	if a, ok := decodeActionFast(data); ok {
		return a, nil
	}
	var a job.Action
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("not an action: %w", err)
	}
	return &a, nil
}

func decodeActionFast(data []byte) (*job.Action, bool) {
	d := layoutReader{b: data, ok: true}
	a := &job.Action{}
	a.Type = job.ActionType(d.field(`{"type":`).enum(string(job.ActionHTTP), string(job.ActionHTTPS)))
	if d.has(`,"request":`) {
		a.Request = d.field(`,"request":`).httpRequest()
	}
	if d.has(`,"retryPolicy":`) {
		a.RetryPolicy = d.field(`,"retryPolicy":`).retryPolicy()
	}
	d.field("}")
	return a, d.ok && len(d.b) == 0
}

// httpRequest consumes a request without authentication in json.Marshal's layout.
func (d *layoutReader) httpRequest() *job.HTTPRequest {
	r := &job.HTTPRequest{}
	r.URI = d.field(`{"uri":`).str()
	r.Method = d.field(`,"method":`).str()
	if d.has(`,"headers":`) {
		r.Headers = d.field(`,"headers":`).stringMap()
	}
	if d.has(`,"body":`) {
		r.Body = d.field(`,"body":`).str()
	}
	d.field("}")
	return r
}

// stringMap consumes an object of strings, as json.Marshal writes a map[string]string.
func (d *layoutReader) stringMap() map[string]string {
	m := map[string]string{}
	d.field("{")
	for sep := ""; d.ok && !d.has("}"); sep = "," {
		k := d.field(sep).str()
		m[k] = d.field(":").str()
	}
	d.field("}")
	return m
}

// retryPolicy consumes a retry policy in json.Marshal's layout (every field may be absent).
func (d *layoutReader) retryPolicy() *job.RetryPolicy {
	p := &job.RetryPolicy{}
	d.field("{")
	sep := ""
	if d.has(`"retryType":`) {
		p.RetryType = job.RetryType(d.field(`"retryType":`).enum(string(job.RetryNone), string(job.RetryFixed)))
		sep = ","
	}
	if d.has(sep + `"retryInterval":`) {
		s := d.field(sep + `"retryInterval":`).raw()
		if v, err := job.ParseDuration(string(s)); d.ok && err == nil {
			p.RetryInterval = &v
		} else {
			d.ok = false
		}
		sep = ","
	}
	if d.has(sep + `"retryCount":`) {
		n := d.field(sep + `"retryCount":`).int()
		p.RetryCount = &n
	}
	d.field("}")
	return p
}
