package jobschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"strings"

	"github.com/resched/resched/shared/job"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// secretGivenAgain follows "is required" for a missing secret: the usual cause is a job read
// (its secrets answered empty or left out) and put back whole.
const secretGivenAgain = " (secrets are never answered, so a job read and put back must give its secrets again; a PATCH keeps them)"

// schemaDocs are the raw schema documents by $id, read for the errorMessage keyword.
type schemaDocs map[string]any

// report turns the leaves of a validation error tree into problems. Intermediate nodes
// (allOf, $ref, if/then) only say that something below failed, so they are skipped.
func (d schemaDocs) report(verr *jsonschema.ValidationError, tree any, base jsonPath, probs *problems) {
	switch k := verr.ErrorKind.(type) {
	case *kind.Required:
		at := instancePath(tree, verr.InstanceLocation, base)
		for _, m := range k.Missing {
			msg := d.message(verr, "required", "is required")
			if job.IsSecretMember("", m) {
				msg += secretGivenAgain
			}
			probs.add(string(at.key(m)), msg)
		}
		return
	case *kind.AdditionalProperties:
		at := instancePath(tree, verr.InstanceLocation, base)
		for _, p := range k.Properties {
			probs.add(string(at.key(p)), d.message(verr, "additionalProperties", "is not a known property"))
		}
		return
	}
	if len(verr.Causes) > 0 {
		for _, c := range verr.Causes {
			d.report(c, tree, base, probs)
		}
		return
	}
	at := instancePath(tree, verr.InstanceLocation, base)
	v := valueAt(tree, verr.InstanceLocation)
	if secretAt(verr.InstanceLocation) {
		v = nil // a password given as a number is not written back in the error (nor its event, nor a log)
	}
	keyword, fallback := describe(verr.ErrorKind, v)
	probs.add(string(at), d.message(verr, keyword, fallback))
}

// secretAt reports whether a location in the document is a secret's (job.IsSecretMember).
func secretAt(loc []string) bool {
	if len(loc) < 2 {
		return false
	}
	return job.IsSecretMember(loc[len(loc)-2], loc[len(loc)-1])
}

// message returns the schema's errorMessage for the keyword that failed, or fallback.
func (d schemaDocs) message(verr *jsonschema.ValidationError, keyword, fallback string) string {
	node := d.schemaAt(verr.SchemaURL)
	obj, ok := node.(map[string]any)
	if !ok {
		return fallback
	}
	switch m := obj["errorMessage"].(type) {
	case string:
		if keyword != "type" { // a wrong type keeps its precise sentence
			return m
		}
	case map[string]any:
		if s, ok := m[keyword].(string); ok {
			return s
		}
	}
	return fallback
}

// schemaAt resolves an absolute schema location (id#/json/pointer) in the raw documents.
func (d schemaDocs) schemaAt(loc string) any {
	id, frag, _ := strings.Cut(loc, "#")
	node, ok := d[id]
	if !ok {
		return nil
	}
	frag, err := url.PathUnescape(frag)
	if err != nil || frag == "" {
		return node
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch n := node.(type) {
		case map[string]any:
			node = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		default:
			return nil
		}
	}
	return node
}

// describe names the keyword of an error kind and writes the sentence used when the schema
// has no errorMessage for it.
func describe(k jsonschema.ErrorKind, v any) (keyword, sentence string) {
	switch k := k.(type) {
	case *kind.Type:
		return "type", typeSentence(k, v)
	case *kind.Enum:
		return "enum", enumSentence(k, v)
	case *kind.Const:
		return "const", fmt.Sprintf("must be %s", display(k.Want))
	case *kind.Minimum:
		return "minimum", "must be at least " + ratText(k.Want)
	case *kind.Maximum:
		return "maximum", "must be at most " + ratText(k.Want)
	case *kind.MinItems:
		return "minItems", fmt.Sprintf("must have at least %d entries", k.Want)
	case *kind.MaxItems:
		return "maxItems", fmt.Sprintf("must have at most %d entries", k.Want)
	case *kind.MinProperties:
		return "minProperties", fmt.Sprintf("must have at least %d members", k.Want)
	case *kind.MaxProperties:
		return "maxProperties", fmt.Sprintf("must have at most %d members, got %d", k.Want, k.Got)
	case *kind.MinLength:
		if k.Want == 1 {
			return "minLength", "must not be empty"
		}
		return "minLength", fmt.Sprintf("must be at least %d characters", k.Want)
	case *kind.MaxLength:
		return "maxLength", fmt.Sprintf("must be at most %d characters, got %d", k.Want, k.Got)
	case *kind.Pattern:
		return "pattern", fmt.Sprintf("does not match the pattern %s", k.Want)
	case *kind.Not:
		return "not", "is not allowed here"
	case *kind.FalseSchema:
		return "false", "is not allowed here"
	}
	keyword = "unknown"
	if p := k.KeywordPath(); len(p) > 0 {
		keyword = p[0]
	}
	return keyword, "is not valid (" + keyword + ")"
}

var typeNames = map[string]string{
	"integer": "a whole number",
	"number":  "a number",
	"string":  "a string",
	"object":  "an object",
	"array":   "a list",
	"boolean": "true or false",
	"null":    "null",
}

func typeSentence(k *kind.Type, v any) string {
	want := make([]string, len(k.Want))
	for i, w := range k.Want {
		want[i] = typeNames[w]
	}
	got := typeNames[k.Got]
	if n, ok := v.(json.Number); ok && k.Got == "number" {
		got = string(n)
	}
	return fmt.Sprintf("must be %s, not %s", strings.Join(want, " or "), got)
}

func enumSentence(k *kind.Enum, v any) string {
	want := make([]string, len(k.Want))
	for i, w := range k.Want {
		want[i] = display(w)
		if s, ok := w.(string); ok {
			want[i] = s // the members are plain names; quotes would only add noise
		}
	}
	return fmt.Sprintf("must be one of %s, not %s", strings.Join(want, ", "), display(v))
}

// display writes a JSON value for a sentence: strings quoted, long values cut.
func display(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = strconv.Quote(v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		s = string(b)
	}
	if len(s) > 60 {
		s = s[:57] + "…"
	}
	return s
}

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(3)
}

// instancePath turns the library's location tokens into a path, using the tree to tell
// array indexes from member names.
func instancePath(tree any, loc []string, base jsonPath) jsonPath {
	at, node := base, tree
	for _, tok := range loc {
		switch n := node.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return at.key(tok)
			}
			at, node = at.index(i), n[i]
		case map[string]any:
			at, node = at.key(tok), n[tok]
		default:
			at, node = at.key(tok), nil
		}
	}
	return at
}

// valueAt returns the value at a location, nil when there is none.
func valueAt(tree any, loc []string) any {
	node := tree
	for _, tok := range loc {
		switch n := node.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		case map[string]any:
			node = n[tok]
		default:
			return nil
		}
	}
	return node
}
