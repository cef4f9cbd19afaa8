package jobschema

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a definition: where (a JSON path such as
// recurrence.schedule.monthDays[2]; empty for the document as a whole) and a plain sentence.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// String returns "path: message", or the message alone for the whole document.
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError is returned for a bad definition; it lists every problem found.
type ValidationError struct {
	Problems []Problem
}

// Error joins the problems.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// problems collects problems, at most one per path and message.
type problems struct {
	list []Problem
}

func (ps *problems) add(path, msg string) {
	p := Problem{Path: path, Message: msg}
	if !slices.Contains(ps.list, p) {
		ps.list = append(ps.list, p)
	}
}

// has reports whether some problem is already recorded at jsonPath.
func (ps *problems) has(path string) bool {
	return slices.ContainsFunc(ps.list, func(p Problem) bool { return p.Path == path })
}

// err returns nil when there is no problem, else a *ValidationError in path order.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := slices.Clone(ps.list)
	slices.SortStableFunc(list, func(a, b Problem) int {
		if c := comparePaths(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return &ValidationError{Problems: list}
}

var digitRun = regexp.MustCompile(`[0-9]+`)

// comparePaths orders paths as a reader expects: hours[2] before hours[10].
func comparePaths(a, b string) int {
	pad := func(s string) string {
		return digitRun.ReplaceAllStringFunc(s, func(d string) string {
			return strings.Repeat("0", max(0, 20-len(d))) + d
		})
	}
	return cmp.Compare(pad(a), pad(b))
}

// jsonPath builds the JSON paths of problems.
type jsonPath string

// isIdentifier reports whether name is [A-Za-z_$][A-Za-z0-9_$]*: a name a path can write
// after a dot. (By hand, not a regular expression: it runs for every member of every
// definition.)
func isIdentifier(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}

// key returns the path of a member: a.b, or a["Content-Type"] when the name is no identifier.
func (p jsonPath) key(name string) jsonPath {
	if !isIdentifier(name) {
		return p + jsonPath("["+strconv.Quote(name)+"]")
	}
	if p == "" {
		return jsonPath(name)
	}
	return p + "." + jsonPath(name)
}

// index returns the path of an array element: a[2].
func (p jsonPath) index(i int) jsonPath {
	return p + jsonPath("["+strconv.Itoa(i)+"]")
}

// step is one step of a JSON path: a member's name or an array element's index.
type step struct {
	key     string
	index   int
	element bool // an array element (index) rather than a member (key)
}

// pathOf writes steps out as a path, as jsonPath.key and jsonPath.index do. A walk over every
// member of every definition keeps its steps and writes them out only when a problem needs
// them.
func pathOf(steps []step) jsonPath {
	var p jsonPath
	for _, s := range steps {
		if s.element {
			p = p.index(s.index)
		} else {
			p = p.key(s.key)
		}
	}
	return p
}
