package schemas

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
)

func TestSchemasAreJSONWithTheirIDs(t *testing.T) {
	for id, raw := range map[string][]byte{JobID: Job(), CollectionID: Collection()} {
		var doc struct {
			Schema string         `json:"$schema"`
			ID     string         `json:"$id"`
			Defs   map[string]any `json:"$defs"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if doc.ID != id || doc.Schema != "https://json-schema.org/draft/2020-12/schema" || len(doc.Defs) == 0 {
			t.Errorf("%s: $id %q, $schema %q, %d $defs", id, doc.ID, doc.Schema, len(doc.Defs))
		}
	}
}

func TestExamplesAreEmbeddedAndParse(t *testing.T) {
	n := 0
	err := fs.WalkDir(FS, "examples", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		raw, err := FS.ReadFile(p)
		if err != nil {
			return err
		}
		if !json.Valid(raw) {
			t.Errorf("%s is not valid JSON", p)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("only %d example files embedded", n)
	}
}
