package bus

import (
	"regexp"
	"testing"
)

// nameRule is the name rule of docs/nats-api.md as a regular expression, the reference
// validName is checked against.
var nameRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func nameInputs() []string {
	long := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	return []string{"", "a", "job_1-A", long, long + "x", "a.b", "a b", "a*", ">", "é", "a\x00", "a\n", "-", "_"}
}

func TestValidNameIsTheRule(t *testing.T) {
	for _, in := range nameInputs() {
		if got, want := validName(in), nameRule.MatchString(in); got != want {
			t.Errorf("%q: validName %v, the rule %v", in, got, want)
		}
	}
}

// FuzzValidName: whatever the name, validName agrees with the rule.
func FuzzValidName(f *testing.F) {
	for _, in := range nameInputs() {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if got, want := validName(in), nameRule.MatchString(in); got != want {
			t.Errorf("%q: validName %v, the rule %v", in, got, want)
		}
	})
}

// A due subject names its collection after the prefix, which may hold dots itself.
func TestDueCollection(t *testing.T) {
	s := NewSubjects("acme.sched")
	for subject, want := range map[string]string{
		s.Due("team-a", "j1"):          "team-a",
		"acme.sched.due.c":             "",
		"acme.sched.results.c.j":       "",
		"scheduler.due.c.j":            "",
		"acme.sched.due.c.j.something": "c",
	} {
		if got := s.DueCollection(subject); got != want {
			t.Errorf("DueCollection(%q) = %q, want %q", subject, got, want)
		}
	}
}

// The cursor for a prefix sorts below every name that starts with it and above every smaller
// name that does not.
func TestAfterForPrefix(t *testing.T) {
	names := []string{"a", "b", "b-", "b0", "bZ", "b_", "ba", "bz", "c", "http-e", "http-every-10", "http-f", "z"}
	for _, prefix := range []string{"b", "http-e", "bz", "a"} {
		after := AfterForPrefix(prefix)
		for _, n := range names {
			starts := len(n) >= len(prefix) && n[:len(prefix)] == prefix
			if starts && n <= after {
				t.Errorf("prefix %q: cursor %q is not below %q", prefix, after, n)
			}
			if !starts && n < prefix && n > after {
				t.Errorf("prefix %q: cursor %q is below %q, which does not start with it", prefix, after, n)
			}
		}
	}
	if AfterForPrefix("") != "" {
		t.Error("no prefix: no cursor")
	}
}
