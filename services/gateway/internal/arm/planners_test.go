package arm

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/gateway/internal/schedapi"
)

// refusal answers every request as a planner refuses a definition: a field's problem and one
// of the body as a whole, with the paths the planners give (a job's relative to its properties,
// a collection's to the resource).
type refusal struct{ fieldPath string }

func (r refusal) RequestMsgWithContext(_ context.Context, m *nats.Msg) (*nats.Msg, error) {
	reply := nats.NewMsg(m.Subject)
	reply.Header.Set(micro.ErrorCodeHeader, "400")
	reply.Data = []byte(`{"error":{"code":"BadRequest","message":"the definition is invalid","details":[` +
		`{"path":"` + r.fieldPath + `","message":"must be at least 1"},{"path":"","message":"not valid JSON"}]}}`)
	return reply, nil
}

// An error names the field as ARM clients know it, under properties once; an error of the body
// as a whole names no field. Both once came out wrong: "properties." for the whole body, and
// "properties.properties.quota.maxJobCount" for a collection.
func TestPlannerErrorsNameTheFieldOnce(t *testing.T) {
	for _, c := range []struct {
		tokens    []string
		fieldPath string
		want      string
	}{
		{[]string{"jobs", "put", "c", "j"}, "recurrence.interval", "properties.recurrence.interval"},
		{[]string{"jobs", "patch", "c", "j"}, "recurrence.frequency", "properties.recurrence.frequency"},
		{[]string{"collections", "put", "c"}, "properties.quota.maxJobCount", "properties.quota.maxJobCount"},
	} {
		p := planners{client: schedapi.Client{NC: refusal{c.fieldPath}}}
		_, err := p.call(context.Background(), nil, nil, c.tokens...)
		var a *apiError
		if !errors.As(err, &a) || len(a.Details) != 2 {
			t.Fatalf("%v: %#v", c.tokens, err)
		}
		if got := a.Details[0].Target; got != c.want {
			t.Errorf("%v: a field's target %q, want %q", c.tokens, got, c.want)
		}
		if got := a.Details[1].Target; got != "" {
			t.Errorf("%v: the whole body's target %q, want none", c.tokens, got)
		}
	}
}
