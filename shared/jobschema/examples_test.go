package jobschema

import (
	"encoding/json"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/resched/resched/schemas"
)

// exampleFiles lists the .json files of one examples directory.
func exampleFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := fs.ReadDir(schemas.FS, dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no examples in %s", dir)
	}
	return out
}

func TestValidExamplesDecode(t *testing.T) {
	v := newValidator(t)
	for _, name := range exampleFiles(t, "examples") {
		raw, err := schemas.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		d, err := v.Decode(raw)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d.Properties.Action == nil || d.Properties.Action.Type == "" {
			t.Errorf("%s: decoded without an action: %+v", name, d.Properties)
		}
	}
}

// TestInvalidExamplesFail checks every file of examples/invalid against its .expect file: the
// exact number of problems, each path, and a fragment of each message.
func TestInvalidExamplesFail(t *testing.T) {
	v := newValidator(t)
	for _, name := range exampleFiles(t, "examples/invalid") {
		t.Run(path.Base(name), func(t *testing.T) {
			raw, err := schemas.FS.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			expRaw, err := schemas.FS.ReadFile(strings.TrimSuffix(name, ".json") + ".expect")
			if err != nil {
				t.Fatalf("every invalid example needs a .expect file: %v", err)
			}
			var want []Problem
			if err := json.Unmarshal(expRaw, &want); err != nil {
				t.Fatalf("bad .expect file: %v", err)
			}
			d, err := v.Decode(raw)
			if d != nil {
				t.Errorf("a definition was returned for an invalid job")
			}
			assertProblems(t, err, want)
		})
	}
}

// TestExpectFilesHaveExamples keeps the invalid folder tidy: no .expect without its job.
func TestExpectFilesHaveExamples(t *testing.T) {
	entries, err := fs.ReadDir(schemas.FS, "examples/invalid")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if base, ok := strings.CutSuffix(e.Name(), ".expect"); ok {
			if _, err := fs.Stat(schemas.FS, "examples/invalid/"+base+".json"); err != nil {
				t.Errorf("%s has no job file", e.Name())
			}
		}
	}
}

// assertProblems checks that err lists exactly the wanted problems, matching paths exactly
// and messages by fragment, in any order.
func assertProblems(t *testing.T, err error, want []Problem) {
	t.Helper()
	ve, ok := err.(*ValidationError)
	if !ok {
		t.Fatalf("got error %v (%T), want a *ValidationError", err, err)
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(ve.Problems), len(want), listProblems(ve.Problems))
	}
	for _, w := range want {
		found := false
		for _, p := range ve.Problems {
			if p.Path == w.Path && strings.Contains(p.Message, w.Message) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("missing problem %q containing %q; got:\n%s", w.Path, w.Message, listProblems(ve.Problems))
		}
	}
}

func listProblems(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

func newValidator(t testing.TB) *Validator {
	t.Helper()
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
