package jobschema

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// canonicaliser rewrites a decoded JSON tree into the spelling the (case-sensitive) schema
// expects, guided by the compiled schema itself, so that the schema stays the only place
// that lists names and enum values. The tree is the decoder's own and is rewritten in place
// (objects whose names need rewriting are copied); what it returns is to be used, not the
// tree it was given:
//   - property names of described objects are matched case-insensitively to the schema's
//     names ("Occurrence" becomes "occurrence"); free-form maps (headers, tags,
//     customMessageProperties) have no described properties and are left alone;
//   - members set to null are dropped ("schedule": null is no schedule), and so are members
//     the schema marks readOnly (status, certificate details), which a client cannot set;
//   - a string where the schema has an enum is replaced by the enum member it matches
//     ignoring case ("week" becomes "Week");
//   - a number where the schema accepts an array is wrapped into one ("hours": 5 is [5]);
//   - a number with a fraction or exponent that is a whole number where the schema wants an
//     integer is written as one (1.0 becomes 1), so that the typed decode can read it.
type canonicaliser struct {
	probs   *problems
	changed *bool  // set when the tree written differs from the tree read
	at      []step // the path of the value being read
}

func (c *canonicaliser) value(sch *jsonschema.Schema, v any) any {
	if sch == nil {
		return v
	}
	f := factsOf(sch)
	switch t := v.(type) {
	case map[string]any:
		return c.object(f, t)
	case []any:
		return c.array(f, t)
	case string:
		if m := f.enumMember(t); m != t {
			c.mark()
			return m
		}
	case json.Number:
		if f.array {
			c.mark()
			return c.array(f, []any{t})
		}
		if !f.integer {
			break
		}
		if w := wholeNumber(t); w != t {
			c.mark()
			return w
		}
	}
	return v // as it came: an unchanged string or number is not boxed again
}

func (c *canonicaliser) mark() {
	if c.changed != nil {
		*c.changed = true
	}
}

func (c *canonicaliser) object(f *facts, obj map[string]any) any {
	if len(f.names) == 0 {
		return obj
	}
	if spelledAsDeclared(f, obj) {
		// The common case: no name to rewrite, so none given twice, and the order of the
		// keys does not matter (problems are sorted by path). The object is rewritten where
		// it is (updating and deleting the members being ranged over is well defined).
		for k, v := range obj {
			sub := f.names[k]
			if v == nil || (sub != nil && factsOf(sub).readOnly) {
				c.mark()
				delete(obj, k)
				continue
			}
			obj[k] = c.member(sub, v, step{key: k})
		}
		return obj
	}
	out := make(map[string]any, len(obj))
	given := make(map[string]string, len(obj))        // canonical name → the spelling used
	for _, k := range slices.Sorted(maps.Keys(obj)) { // in order: which spelling wins is stable
		name := f.canonicalName(k)
		if name != k {
			c.mark()
		}
		if prev, dup := given[name]; dup {
			// The same value under two spellings is that value: the gateway answers a
			// monthly occurrence's count as "occurrence" and "Occurrence", and a client that
			// puts back what it read sends both.
			if !reflect.DeepEqual(obj[prev], obj[k]) {
				c.probs.add(string(pathOf(c.at).key(name)), fmt.Sprintf(
					"given twice, as %q and %q (property names are matched ignoring case)", prev, k))
			}
			c.mark()
			continue
		}
		given[name] = k
		sub := f.names[name]
		if obj[k] == nil || (sub != nil && factsOf(sub).readOnly) {
			c.mark()
			continue
		}
		out[name] = c.member(sub, obj[k], step{key: name})
	}
	return out
}

// member canonicalises a member or an element of the value being read.
func (c *canonicaliser) member(sch *jsonschema.Schema, v any, s step) any {
	if c.at == nil {
		c.at = make([]step, 0, 8) // deeper than any job's members: one allocation per document
	}
	c.at = append(c.at, s)
	out := c.value(sch, v)
	c.at = c.at[:len(c.at)-1]
	return out
}

// spelledAsDeclared reports whether every key of obj is spelled as the schema declares it
// (or matches no declared name at all).
func spelledAsDeclared(f *facts, obj map[string]any) bool {
	for k := range obj {
		if f.canonicalName(k) != k {
			return false
		}
	}
	return true
}

func (c *canonicaliser) array(f *facts, arr []any) any {
	for i, e := range arr {
		arr[i] = c.member(f.items, e, step{index: i, element: true})
	}
	return arr
}

// chain returns the schema and the schemas its $ref leads to: a property declared with
// {"$ref": ..., "description": ...} has its keywords on the target.
func chain(sch *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for s := sch; s != nil && len(out) < 16; s = s.Ref {
		out = append(out, s)
	}
	return out
}

// declared returns the properties a schema describes, the nearest declaration winning.
func declared(sch *jsonschema.Schema) map[string]*jsonschema.Schema {
	names := map[string]*jsonschema.Schema{}
	for _, s := range chain(sch) {
		for n, sub := range s.Properties {
			if _, ok := names[n]; !ok {
				names[n] = sub
			}
		}
	}
	return names
}

func readOnly(sch *jsonschema.Schema) bool {
	return slices.ContainsFunc(chain(sch), func(s *jsonschema.Schema) bool { return s.ReadOnly })
}

func hasType(sch *jsonschema.Schema, t string) bool {
	for _, s := range chain(sch) {
		if s.Types != nil && !s.Types.IsEmpty() {
			return slices.Contains(s.Types.ToStrings(), t)
		}
	}
	return false
}

func itemsOf(sch *jsonschema.Schema) *jsonschema.Schema {
	for _, s := range chain(sch) {
		if s.Items2020 != nil {
			return s.Items2020
		}
	}
	return nil
}

// wholeNumber writes 1.0 or 1e2 as 1 or 100 when the value is a whole number small enough
// to be exact in a float64; anything else is left for the schema to judge.
func wholeNumber(n json.Number) json.Number {
	if !strings.ContainsAny(string(n), ".eE") {
		return n
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return n
	}
	return json.Number(strconv.FormatInt(int64(f), 10))
}
