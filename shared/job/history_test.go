package job

import (
	"testing"
	"unicode/utf8"
)

// A message is cut on a character's boundary, never through it, and never longer than asked.
func TestCutMessage(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"hello", 0, "hello"}, // no limit
		{"héllo", 2, "h"},     // é is two bytes: not split
		{"héllo", 3, "hé"},
		{"日本", 4, "日"},
		{"日本", 2, ""},
	} {
		got := CutMessage(c.in, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("CutMessage(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
