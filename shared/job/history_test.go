package job

import (
	"testing"
	"time"
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

// An entry's ID is its start to the millisecond, its action and its attempt: what the REST
// surface names it by and what schedctl's --watch tells entries apart by.
func TestHistoryEntryID(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.UTC)
	for _, c := range []struct {
		e    HistoryEntry
		want string
	}{
		{HistoryEntry{StartTime: at, ActionName: ActionNameMain}, "1772366400123M0"},
		{HistoryEntry{StartTime: at, ActionName: ActionNameError, RetryCount: 2}, "1772366400123E2"},
	} {
		if got := c.e.ID(); got != c.want {
			t.Errorf("ID of %+v = %q, want %q", c.e, got, c.want)
		}
	}
}
