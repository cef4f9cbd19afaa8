package main

import (
	"flag"
	"fmt"
	"path"
	"slices"
	"strings"
)

// filters are the --filter expressions of a listing, all of which an item must match:
// FIELD=VALUE, FIELD!=VALUE or FIELD~PATTERN (a glob: report-*), values compared ignoring
// case, as `gcloud --filter` reads its simplest forms. One flag may hold several, separated by
// commas, as kubectl's selectors do: no value of a field holds a comma, so a comma always ends
// an expression (read as part of the value, state=Enabled,type=Http matched nothing).
type filters struct{ exprs listFlag }

func filterFlags(fs *flag.FlagSet) *filters {
	f := &filters{}
	fs.Var(&f.exprs, "filter", "keep the items where `FIELD=VALUE`, FIELD!=VALUE or FIELD~GLOB (repeat, or separate with commas: all must hold)")
	return f
}

// given reports whether any expression was given.
func (f *filters) given() bool { return len(f.exprs) > 0 }

// compile checks the expressions against the fields a listing has and returns the matcher.
func (f *filters) compile(fields []string) (func(map[string]string) bool, error) {
	type cond struct {
		field, op, value string
	}
	var conds []cond
	var exprs []string
	for _, e := range f.exprs {
		exprs = append(exprs, strings.Split(e, ",")...)
	}
	for _, e := range exprs {
		c, err := func() (cond, error) {
			for _, op := range []string{"!=", "=", "~"} {
				if field, value, ok := strings.Cut(e, op); ok {
					field = strings.ToLower(strings.TrimSpace(field))
					if !slices.Contains(fields, field) {
						return cond{}, usagef("--filter %q: no field %q; the fields are %s", e, field, strings.Join(fields, ", "))
					}
					if op == "~" {
						if _, err := path.Match(value, ""); err != nil {
							return cond{}, usagef("--filter %q: %v", e, err)
						}
					}
					return cond{field, op, strings.TrimSpace(value)}, nil
				}
			}
			return cond{}, usagef("--filter %q: write FIELD=VALUE, FIELD!=VALUE or FIELD~GLOB", e)
		}()
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return func(item map[string]string) bool {
		for _, c := range conds {
			v := item[c.field]
			var ok bool
			switch c.op {
			case "=":
				ok = strings.EqualFold(v, c.value) || strings.HasPrefix(strings.ToLower(v), strings.ToLower(c.value)+" (")
			case "!=":
				ok = !strings.EqualFold(v, c.value) && !strings.HasPrefix(strings.ToLower(v), strings.ToLower(c.value)+" (")
			case "~":
				ok, _ = path.Match(strings.ToLower(c.value), strings.ToLower(v))
			}
			if !ok {
				return false
			}
		}
		return true
	}, nil
}

func (f *filters) String() string { return fmt.Sprint([]string(f.exprs)) }
