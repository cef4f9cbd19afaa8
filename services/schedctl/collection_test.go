package main

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/shared/job"
)

func TestCollectionCommands(t *testing.T) {
	p := startPlanner(t)

	out := p.mustRun(t, "", "collection", "create", "c1", "--max-jobs", "10", "--max-recurrence", "1m", "--plan", "standard")
	wantLines(t, out, "collection c1 created", "Name:  +c1", "State:  +Enabled", "Plan:  +Standard", "Max jobs:  +10", "Max recurrence:  +Minute/1")

	t.Run("create leaves an existing collection alone", func(t *testing.T) {
		p.mustFail(t, "", 1, []string{"schedctl: job collection c1 already exists: update it"}, "collection", "create", "c1", "--max-jobs", "3")
		var c job.Collection
		decode(t, p.mustRun(t, "", "collection", "get", "c1", "-o", "json"), &c)
		if c.Properties.Quota.MaxJobCount != 10 {
			t.Fatalf("the refused create changed the collection: %+v", c.Properties.Quota)
		}
	})

	t.Run("update changes what is given and keeps the rest", func(t *testing.T) {
		wantLines(t, p.mustRun(t, "", "collection", "update", "c1", "--max-jobs", "20"),
			"collection c1 updated", "Max jobs:  +20", "Max recurrence:  +Minute/1", "Plan:  +Standard")
		file := `{"location": "West Europe", "properties": {"quota": {"maxJobCount": 30, "maxRecurrence": {"frequency": "Hour", "interval": 2}}}}`
		wantLines(t, p.mustRun(t, file, "collection", "update", "c1", "-f", "-"),
			"Location:  +West Europe", "Max jobs:  +30", "Max recurrence:  +Hour/2", "Plan:  +-")
		p.mustFail(t, "", 2, []string{"nothing to change"}, "collection", "update", "c1")
		p.mustFail(t, "", 1, []string{"job collection nowhere not found"}, "collection", "update", "nowhere", "--max-jobs", "1")
		p.mustFail(t, "", 2, []string{"--plan", "Gold"}, "collection", "update", "c1", "--plan", "Gold")
	})

	var c job.Collection
	decode(t, p.mustRun(t, "", "collection", "create", "c2", "-o", "json"), &c)
	if c.Name != "c2" || c.Properties.State != job.CollectionEnabled || c.Properties.Quota != nil {
		t.Fatalf("create -o json answered %+v", c)
	}
	p.mustRun(t, "", "collection", "create", "c3")

	want := "NAME  STATE    PLAN  MAX JOBS  MAX RECURRENCE\n" +
		"c1    Enabled  -     30        Hour/2\n" +
		"c2    Enabled  -     -         -\n" +
		"c3    Enabled  -     -         -\n"
	if out := p.mustRun(t, "", "collection", "list"); out != want {
		t.Fatalf("collection list:\n%s\nwant:\n%s", out, want)
	}
	if out := p.mustRun(t, "", "collection", "list", "-o", "yaml"); !strings.Contains(out, "value:\n- id: /jobCollections/c1\n") {
		t.Fatalf("collection list -o yaml:\n%s", out)
	}

	t.Run("paging", func(t *testing.T) {
		code, out, errOut := p.schedctl(t, "", "collection", "list", "--top", "2")
		if code != 0 || strings.Count(out, "\n") != 3 || strings.TrimSpace(errOut) != "(3 in all; more: add --after c2, or --all)" {
			t.Fatalf("list --top 2: exit %d\n%s\nstderr %q", code, out, errOut)
		}
		// Filtered, a page's count of every collection would read as the matches'.
		if _, _, errOut := p.schedctl(t, "", "collection", "list", "--top", "2", "--filter", "name~c*"); strings.TrimSpace(errOut) != "(more: add --after c2, or --all)" {
			t.Fatalf("list --top 2 --filter: stderr %q", errOut)
		}
		var page struct {
			Value    []job.Collection `json:"value"`
			NextLink *pageLink        `json:"nextLink"`
		}
		decode(t, p.mustRun(t, "", "collection", "list", "--top", "2", "-o", "json"), &page)
		if len(page.Value) != 2 || page.NextLink == nil || *page.NextLink != (pageLink{Top: 2, After: "c2"}) {
			t.Fatalf("list --top 2 -o json: %+v", page)
		}
		if out := p.mustRun(t, "", "collection", "list", "--after", "c2"); !strings.Contains(out, "\nc3 ") || strings.Count(out, "\n") != 2 {
			t.Fatalf("list --after c2:\n%s", out)
		}
		page.Value, page.NextLink = nil, nil
		decode(t, p.mustRun(t, "", "collection", "list", "--top", "1", "--all", "-o", "json"), &page)
		if len(page.Value) != 3 || page.Value[2].Name != "c3" || page.NextLink != nil {
			t.Fatalf("list --top 1 --all -o json: %+v", page)
		}
	})

	t.Run("disable, enable and filters", func(t *testing.T) {
		wantLines(t, p.mustRun(t, "", "collection", "disable", "c2"), "State:  +Disabled")
		decode(t, p.mustRun(t, "", "collection", "get", "c2", "-o", "json"), &c)
		if c.Properties.State != job.CollectionDisabled {
			t.Fatalf("get after disable: state %q", c.Properties.State)
		}
		if out := p.mustRun(t, "", "collection", "list", "--filter", "state=disabled"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "\nc2 ") {
			t.Fatalf("list --filter state=disabled:\n%s", out)
		}
		if out := p.mustRun(t, "", "collection", "list", "--filter", "name~c[13]", "--filter", "state!=disabled"); strings.Count(out, "\n") != 3 {
			t.Fatalf("list with two filters:\n%s", out)
		}
		if out := p.mustRun(t, "", "collection", "list", "--filter", "name~c[13],state!=disabled"); strings.Count(out, "\n") != 3 {
			t.Fatalf("list with two filters in one flag:\n%s", out)
		}
		p.mustFail(t, "", 2, []string{`"colour=red": no field "colour"`}, "collection", "list", "--filter", "plan=standard,colour=red")
		p.mustFail(t, "", 2, []string{`no field "colour"`, "name, state, plan"}, "collection", "list", "--filter", "colour=red")
		p.mustFail(t, "", 2, []string{"FIELD=VALUE"}, "collection", "list", "--filter", "state")
		wantLines(t, p.mustRun(t, "", "collection", "enable", "c2"), "State:  +Enabled")
	})

	t.Run("delete asks first", func(t *testing.T) {
		p.mustFail(t, "", 1, []string{"Delete collection c3 and every job in it", "add --yes"}, "collection", "delete", "c3")
		p.mustFail(t, "n\n", 1, []string{"not confirmed: nothing done"}, "collection", "delete", "c3")
		p.mustRun(t, "", "collection", "get", "c3")
		if out := p.mustRun(t, "yes\n", "collection", "delete", "c3"); out != "collection c3 deleted\n" {
			t.Fatalf("delete printed %q", out)
		}
		p.mustRun(t, "", "collection", "create", "c3")
		p.mustRun(t, "", "collection", "delete", "c3", "--yes")
		code, out, errOut := p.schedctl(t, "", "collection", "get", "c3")
		if code != 1 || out != "" || errOut != "schedctl: job collection c3 not found\n" {
			t.Fatalf("get of a deleted collection: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})

	t.Run("mistakes", func(t *testing.T) {
		p.mustFail(t, `{"properties": {"quota": {"maxJobCount": "ten"}}}`, 2, []string{"\n  properties.quota.maxJobCount: "},
			"collection", "create", "bad", "-f", "-")
		p.mustFail(t, `{"properties": {"qouta": {}}}`, 2, []string{"qouta"}, "collection", "create", "bad", "-f", "-")
		p.mustFail(t, "", 2, []string{`collection name "bad.name"`, "usage: schedctl collection get NAME"}, "collection", "get", "bad.name")
		p.mustFail(t, "", 2, []string{"--max-jobs -1: must be 0"}, "collection", "create", "bad", "--max-jobs", "-1")
		p.mustFail(t, "", 2, []string{"-f and the quota flags exclude each other"}, "collection", "create", "bad", "-f", "x.json", "--max-jobs", "1")
		p.mustFail(t, "", 2, []string{`-o "xml": must be table, json or yaml`}, "collection", "list", "-o", "xml")
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

// During a rolling upgrade a planner of the earlier release ignores a listing's cursor and
// answers from the first collection again (its nextLink an offset): --all still lists each
// collection once, in order. A stand-in answers the first page as this release and the rest as
// the earlier one.
func TestCollectionListAllAcrossAnUpgrade(t *testing.T) {
	ns := natstest.Start(t)
	names := []string{"c1", "c2", "c3", "c4", "c5"}
	requests := 0
	standIn(t, ns, "mixed.api.collections.list", func(m *nats.Msg) {
		var req listRequest
		_ = json.Unmarshal(m.Data, &req)
		requests++
		from := req.Skip
		if requests == 1 { // this release: from the cursor
			from = sort.SearchStrings(names, req.After+"\x00")
		}
		end := min(from+req.Top, len(names))
		reply := map[string]any{}
		var value []job.Collection
		for _, n := range names[from:end] {
			value = append(value, job.Collection{Name: n, Properties: job.CollectionProperties{State: job.CollectionEnabled}})
		}
		reply["value"] = value
		switch {
		case end == len(names):
		case requests == 1:
			reply["nextLink"] = listRequest{Top: req.Top, After: names[end-1]}
		default:
			reply["nextLink"] = listRequest{Top: req.Top, Skip: end}
		}
		body, _ := json.Marshal(reply)
		_ = m.Respond(body)
	})
	code, out, errOut := schedctl(t, "", "collection", "list", "--all", "--top", "2", "--prefix", "mixed", "--server", ns.ClientURL())
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		listed = append(listed, strings.Fields(line)[0])
	}
	if code != 0 || strings.Join(listed, " ") != strings.Join(names, " ") {
		t.Fatalf("collection list --all: exit %d, listed %v, want %v once each\n%s%s", code, listed, names, out, errOut)
	}
}
