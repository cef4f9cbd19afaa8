package jobschema

import (
	"bytes"
	"strings"
	"testing"

	"github.com/resched/resched/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestEditorsSeeTheExamplesAsValid validates the valid examples, as written and without the
// canonicaliser, against the top-level job schema, as an editor would: the examples use
// canonical spellings, so an editor must not flag them.
func TestEditorsSeeTheExamplesAsValid(t *testing.T) {
	c := jsonschema.NewCompiler()
	for id, raw := range map[string][]byte{schemas.JobID: schemas.Job(), schemas.CollectionID: schemas.Collection()} {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatal(err)
		}
	}
	root, err := c.Compile(schemas.JobID)
	if err != nil {
		t.Fatal(err)
	}
	collection, err := c.Compile(schemas.CollectionID)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range exampleFiles(t, "examples/collections") {
		raw, _ := schemas.FS.ReadFile(name)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := collection.Validate(doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range exampleFiles(t, "examples") {
		raw, _ := schemas.FS.ReadFile(name)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := root.Validate(doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// And a schema-level rejection is visible to editors too.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(withRecurrence(`{"frequency":"Week","interval":79}`)))
	if err := root.Validate(bad); err == nil {
		t.Error("the top-level schema accepted interval 79 with Week")
	}
}

// TestEveryPropertyHasADescription keeps the schema usable in editors: every property of
// every object has a description, directly or on the definition it refers to, except
// booleans (placeholders) and read-only or self-explanatory Service Bus fields.
func TestEveryPropertyHasADescription(t *testing.T) {
	v := newValidator(t)
	var missing []string
	seen := map[*jsonschema.Schema]bool{}
	var walk func(s *jsonschema.Schema, at string)
	walk = func(s *jsonschema.Schema, at string) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		for name, sub := range declared(s) {
			if sub.Bool == nil && !describedAnywhere(sub) && !strings.Contains(at, "brokeredMessageProperties") &&
				!strings.HasPrefix(name, "certificate") {
				missing = append(missing, at+"."+name)
			}
			walk(sub, at+"."+name)
			walk(itemsOf(sub), at+"."+name+"[]")
		}
	}
	walk(v.job, "job")
	walk(v.collection, "collection")
	if len(missing) > 0 {
		t.Errorf("properties without a description: %v", missing)
	}
}

func describedAnywhere(s *jsonschema.Schema) bool {
	for _, c := range chain(s) {
		if c.Description != "" {
			return true
		}
	}
	return false
}
