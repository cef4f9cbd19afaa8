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
// there was none.
func checkNumbers(v any, at jsonPath, probs *problems) bool {
	ok := true
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ok = checkNumbers(v[k], at.key(k), probs) && ok
		}
	case []any:
		for i, e := range v {
			ok = checkNumbers(e, at.index(i), probs) && ok
		}
	case json.Number:
		if i := strings.IndexAny(string(v), "eE"); i >= 0 {
			exp, err := strconv.Atoi(strings.TrimPrefix(string(v)[i+1:], "+"))
			if err != nil || exp > maxExponent || exp < -maxExponent {
				probs.add(string(at), "is out of range: the exponent of a number must be between -400 and 400")
				return false
			}
		}
	}
	return ok
}
