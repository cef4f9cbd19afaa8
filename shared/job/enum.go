package job

import (
	"fmt"
	"strings"
)

// parseName matches s case-insensitively against the canonical names of a string enum and
// returns the canonical spelling, so that what is stored and echoed never depends on the
// casing a client happened to use.
func parseName[T ~string](kind, s string, names []T) (T, error) {
	for _, n := range names {
		if strings.EqualFold(s, string(n)) {
			return n, nil
		}
	}
	list := make([]string, len(names))
	for i, n := range names {
		list[i] = string(n)
	}
	return "", fmt.Errorf("unknown %s %q: must be one of %s", kind, s, strings.Join(list, ", "))
}
