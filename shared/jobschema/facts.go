package jobschema

import (
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// facts are what the canonicaliser reads of a compiled schema, worked out once per schema:
// every definition that goes through the planner walks the same few dozen subschemas.
type facts struct {
	names    map[string]*jsonschema.Schema // declared properties (declared)
	folded   map[string]string             // lower-cased property name → the declared one
	readOnly bool
	array    bool // its type includes array
	integer  bool // its type is integer and not number
	items    *jsonschema.Schema
	enum     map[string]string // lower-cased enum member → the member; nil without an enum
}

// factsCache maps *jsonschema.Schema to *facts. Compiled schemas never change.
var factsCache sync.Map

func factsOf(sch *jsonschema.Schema) *facts {
	if f, ok := factsCache.Load(sch); ok {
		return f.(*facts)
	}
	f := &facts{names: declared(sch), readOnly: readOnly(sch), array: hasType(sch, "array"),
		integer: hasType(sch, "integer") && !hasType(sch, "number"), items: itemsOf(sch)}
	f.folded = make(map[string]string, len(f.names))
	for n := range f.names {
		f.folded[strings.ToLower(n)] = n
	}
	for _, sc := range chain(sch) {
		if sc.Enum == nil {
			continue
		}
		f.enum = map[string]string{}
		for _, m := range sc.Enum.Values {
			if ms, ok := m.(string); ok {
				if _, dup := f.enum[strings.ToLower(ms)]; !dup {
					f.enum[strings.ToLower(ms)] = ms
				}
			}
		}
		break
	}
	factsCache.Store(sch, f)
	return f
}

// canonicalName returns the declared name k matches: exactly, else ignoring case, else k
// itself (the schema then reports it as unknown).
func (f *facts) canonicalName(k string) string {
	if _, ok := f.names[k]; ok {
		return k
	}
	if n, ok := f.folded[strings.ToLower(k)]; ok {
		return n
	}
	return k
}

// enumMember returns the enum member s matches ignoring case, or s when none does.
func (f *facts) enumMember(s string) string {
	if f.enum == nil {
		return s
	}
	if m, ok := f.enum[strings.ToLower(s)]; ok {
		return m
	}
	return s
}
