package jobschema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/resched/resched/schemas"
)

// FuzzDecode checks, for any input, that Decode does not panic, that it returns either a
// definition or problems (never both, never neither), and that an accepted definition, written
// back as JSON, is accepted again unchanged: what the planner stores must stay valid. It also
// checks that the cheap way to accept a job (conditions.go) accepts nothing the whole schema
// refuses.
func FuzzDecode(f *testing.F) {
	for _, dir := range []string{"examples", "examples/invalid"} {
		for _, name := range exampleFiles(f, dir) {
			raw, err := schemas.FS.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	f.Add([]byte(withRecurrence(`{"frequency":"month","schedule":{"hours":5,"monthlyOccurrences":[{"Day":"friday","Occurrence":-1}]}}`)))
	f.Add([]byte(withAction(`{` + httpAction + `,"retryPolicy":{"retryInterval":"1.02:03:04.5"}}`)))
	f.Add([]byte(withAction(`{"type":"Https","request":{"uri":"https://localhost/","method":"GET","authentication":{"type":"ActiveDirectoryOAuth","tenant":"t","audience":"a","clientId":"c","secret":"s"}}}`)))
	f.Add([]byte(withAction(`{"type":"Https","request":{"uri":"https://localhost/","method":"GET","authentication":{"type":"ClientCertificate","pfx":"UEZY","password":"p"}}}`)))
	for _, in := range conditionCases {
		f.Add([]byte(in))
	}
	f.Add([]byte(`{"startTime":"2012-08-04t00:00:00.9+05:30",` + withRecurrence(`{"frequency":"Year","count":1.0,"endTime":"2012-08-04","schedule":{"months":2,"monthDays":-1}}`)[1:]))
	v, err := New()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if canon, ok := canonicalJob(v, raw); ok && v.jobHolds(canon) {
			if err := v.job.Validate(canon); err != nil {
				t.Fatalf("the cheap check accepts what the schema refuses: %v", err)
			}
		}
		d, err := v.Decode(raw)
		if err != nil {
			ve, ok := err.(*ValidationError)
			if !ok || len(ve.Problems) == 0 {
				t.Fatalf("error %v (%T) is not a ValidationError with problems", err, err)
			}
			if d != nil {
				t.Fatal("a definition was returned with problems")
			}
			for _, p := range ve.Problems {
				if p.Message == "" {
					t.Fatalf("empty message at %q", p.Path)
				}
			}
			return
		}
		if d == nil || d.Properties.Action == nil {
			t.Fatalf("accepted without a definition or an action: %+v", d)
		}
		// The shortcut of typedJob (the bytes read directly) gives what the canonical tree gives.
		probs := &problems{}
		tree, _ := parse(raw, "job", probs)
		props := unwrap(tree, probs)
		canon := (&canonicaliser{probs: probs}).value(v.job, props)
		slow, err := typedJob(raw, false, canon, true)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := mustJSON(t, d.Properties), mustJSON(t, slow.Properties); !bytes.Equal(a, b) {
			t.Fatalf("reading the bytes and reading the canonical tree differ:\n%s\n%s", a, b)
		}
		first, err := json.Marshal(d.Properties)
		if err != nil {
			t.Fatalf("cannot write the accepted definition: %v", err)
		}
		again, err := v.Decode(first)
		if err != nil {
			t.Fatalf("the accepted definition, written back, is refused:\n%s\n%v", first, err)
		}
		second, _ := json.Marshal(again.Properties)
		if !bytes.Equal(first, second) {
			t.Fatalf("writing back is not stable:\n%s\n%s", first, second)
		}
		if _, err := json.Marshal(d.Redacted()); err != nil {
			t.Fatalf("cannot write the redacted definition: %v", err)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkDecode: the whole intake path of one definition (parse, canonicalise, validate,
// Go checks, typed decode), for a weekly job with an error action and for an hourly job with
// a Basic authentication (what the API and intake benchmarks put).
func BenchmarkDecode(b *testing.B) {
	weekly, err := schemas.FS.ReadFile("examples/http-weekly-schedule.json")
	if err != nil {
		b.Fatal(err)
	}
	hourly := []byte(`{"startTime": "2024-01-02T00:00:00Z",
  "action": {"type": "Https", "request": {"uri": "https://example.com/hook", "method": "POST",
    "authentication": {"type": "Basic", "username": "u", "password": "s3cret-pass"}}},
  "recurrence": {"frequency": "Hour", "interval": 1}}`)
	v, err := New()
	if err != nil {
		b.Fatal(err)
	}
	for name, raw := range map[string][]byte{"weekly": weekly, "hourly-basic": hourly} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		if _, err := New(); err != nil {
			b.Fatal(err)
		}
	}
}
