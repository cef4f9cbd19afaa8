package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/resched/resched/shared/job"
)

func TestCollectionCommands(t *testing.T) {
	p := startPlanner(t)

	out := p.mustRun(t, "", "collection", "create", "c1", "--max-jobs", "10", "--max-recurrence", "1m")
	wantLines(t, out, "collection c1 created", "Name:  +c1", "State:  +Enabled", "Max jobs:  +10", "Max recurrence:  +Minute/1")

	file := `{"location": "West Europe", "properties": {"quota": {"maxJobCount": 20, "maxRecurrence": {"frequency": "Hour", "interval": 2}}}}`
	out = p.mustRun(t, file, "collection", "create", "c1", "-f", "-")
	wantLines(t, out, "collection c1 replaced", "Location:  +West Europe", "Max jobs:  +20", "Max recurrence:  +Hour/2")

	var c job.Collection
	decode(t, p.mustRun(t, "", "collection", "create", "c2", "-o", "json"), &c)
	if c.Name != "c2" || c.Properties.State != job.CollectionEnabled || c.Properties.Quota != nil {
		t.Fatalf("create -o json answered %+v", c)
	}
	p.mustRun(t, "", "collection", "create", "c3")

	want := "NAME  STATE    MAX JOBS  MAX RECURRENCE\n" +
		"c1    Enabled  20        Hour/2\n" +
		"c2    Enabled  -         -\n" +
		"c3    Enabled  -         -\n"
	if out := p.mustRun(t, "", "collection", "list"); out != want {
		t.Fatalf("collection list:\n%s\nwant:\n%s", out, want)
	}

	t.Run("paging", func(t *testing.T) {
		code, out, errOut := p.schedctl(t, "", "collection", "list", "--top", "2")
		if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(errOut, "--skip 2, or --all") {
			t.Fatalf("list --top 2: exit %d\n%s\nstderr %q", code, out, errOut)
		}
		var page struct {
			Value    []job.Collection `json:"value"`
			NextLink *pageLink        `json:"nextLink"`
		}
		decode(t, p.mustRun(t, "", "collection", "list", "--top", "2", "-o", "json"), &page)
		if len(page.Value) != 2 || page.NextLink == nil || *page.NextLink != (pageLink{Top: 2, Skip: 2}) {
			t.Fatalf("list --top 2 -o json: %+v", page)
		}
		page.Value, page.NextLink = nil, nil
		decode(t, p.mustRun(t, "", "collection", "list", "--top", "1", "--all", "-o", "json"), &page)
		if len(page.Value) != 3 || page.Value[2].Name != "c3" || page.NextLink != nil {
			t.Fatalf("list --top 1 --all -o json: %+v", page)
		}
	})

	t.Run("disable and enable", func(t *testing.T) {
		wantLines(t, p.mustRun(t, "", "collection", "disable", "c2"), "State:  +Disabled")
		decode(t, p.mustRun(t, "", "collection", "get", "c2", "-o", "json"), &c)
		if c.Properties.State != job.CollectionDisabled {
			t.Fatalf("get after disable: state %q", c.Properties.State)
		}
		wantLines(t, p.mustRun(t, "", "collection", "enable", "c2"), "State:  +Enabled")
	})

	t.Run("delete, then not found", func(t *testing.T) {
		if out := p.mustRun(t, "", "collection", "delete", "c3"); out != "collection c3 deleted\n" {
			t.Fatalf("delete printed %q", out)
		}
		code, out, errOut := p.schedctl(t, "", "collection", "get", "c3")
		if code != 1 || out != "" || errOut != "schedctl: job collection c3 not found\n" {
			t.Fatalf("get of a deleted collection: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})

	t.Run("the planner rejects a field", func(t *testing.T) {
		code, out, errOut := p.schedctl(t, `{"properties": {"quota": {"maxJobCount": "ten"}}}`, "collection", "create", "bad", "-f", "-")
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "schedctl: ") ||
			!strings.Contains(errOut, "\n  properties.quota.maxJobCount: ") {
			t.Fatalf("invalid collection: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

func TestParseMaxRecurrence(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "Frequency/Interval", or "" for an error
	}{
		{"1m", "Minute/1"},
		{"30s", "Second/30"},
		{"2h", "Hour/2"},
		{"1d", "Day/1"},
		{"1w", "Week/1"},
		{"3mo", "Month/3"},
		{"1y", "Year/1"},
		{"Minute:5", "Minute/5"},
		{"hour:12", "Hour/12"},
		{"Week", "Week/1"},
		{"5x", ""},
		{"0m", ""},
		{"Minute:0", ""},
		{"Minute:five", ""},
		{"Fortnight:1", ""},
		{"", ""},
	} {
		got, err := parseMaxRecurrence(tc.in)
		text := ""
		if err == nil {
			text = got.Frequency.String() + "/" + strconv.Itoa(got.Interval)
		}
		if text != tc.want {
			t.Errorf("parseMaxRecurrence(%q) = %q, %v; want %q", tc.in, text, err, tc.want)
		}
	}
}

// decode reads a command's JSON output.
func decode(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output is not the JSON expected: %v\n%s", err, out)
	}
}

// wantLines checks that out has a line matching each pattern, in which two or more spaces
// followed by + stand for the padding of a table: "Name:  +c1" matches "Name:   c1".
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for _, p := range patterns {
		found := false
		for _, l := range lines {
			if matchLine(l, p) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no line %q in:\n%s", p, out)
		}
	}
}

func matchLine(line, pattern string) bool {
	key, value, padded := strings.Cut(pattern, "  +")
	if !padded {
		return line == pattern
	}
	rest, ok := strings.CutPrefix(line, key)
	if !ok || !strings.HasPrefix(rest, " ") {
		return false
	}
	return strings.TrimLeft(rest, " ") == value
}
