package jobschema

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// maxExponent bounds the exponent of a number. The validator turns every number into an
// exact big.Rat: 1e999999999 makes it panic and 1e9999999 makes it build a 33-million-bit
// integer, so such texts are refused before validation. No field of a job needs more than ten
// digits.
const maxExponent = 400

// checkNumbers reports every number of the tree whose exponent is out of bounds, and whether
// there was none. The paths are built only when there is one: every definition is checked.
func checkNumbers(v any, at jsonPath, probs *problems) bool {
	if numbersInRange(v) {
		return true
	}
	return reportNumbers(v, at, probs)
}

// numbersInRange reports whether every number of the tree has an exponent within bounds.
func numbersInRange(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if !numbersInRange(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !numbersInRange(e) {
				return false
			}
		}
	case json.Number:
		return exponentInRange(v)
	}
	return true
}

// exponentInRange reports whether a number's exponent, if it has one, is within bounds.
func exponentInRange(n json.Number) bool {
	i := strings.IndexAny(string(n), "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(string(n)[i+1:], "+"))
	return err == nil && exp <= maxExponent && exp >= -maxExponent
}

// reportNumbers adds a problem for every number out of bounds, with its path.
func reportNumbers(v any, at jsonPath, probs *problems) bool {
	ok := true
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ok = reportNumbers(v[k], at.key(k), probs) && ok
		}
	case []any:
		for i, e := range v {
			ok = reportNumbers(e, at.index(i), probs) && ok
		}
	case json.Number:
		if !exponentInRange(v) {
			probs.add(string(at), "is out of range: the exponent of a number must be between -400 and 400")
			return false
		}
	}
	return ok
}
