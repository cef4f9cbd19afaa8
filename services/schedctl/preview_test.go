package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const action = `"action":{"type":"Http","request":{"method":"GET","uri":"http://localhost:8080/ping"}}`

func runPreviewWith(t *testing.T, clock time.Time, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = previewCommand(func() time.Time { return clock })(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestPreviewPrintsExecutions(t *testing.T) {
	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, job string
		args      []string
		want      string
	}{
		{
			name: "weekly with zone and --now (docs/recurrence.md §9)",
			job: `{"properties":{"startTime":"2020-09-18T08:00",` + action + `,"recurrence":{"frequency":"Week","timeZone":"Pacific Standard Time",` +
				`"schedule":{"weekDays":["Monday"],"hours":[10,12,14],"minutes":[30]}}}}`,
			args: []string{"--now", "2020-09-04T17:00:00Z", "-n", "4"},
			want: "2020-09-21T17:30:00Z\n2020-09-21T19:30:00Z\n2020-09-21T21:30:00Z\n2020-09-28T17:30:00Z\n",
		},
		{
			name: "count ends the list early",
			job:  `{"startTime":"2024-01-01T10:00:00Z",` + action + `,"recurrence":{"frequency":"Day","count":2}}`,
			args: []string{"--now", "2023-12-01T00:00:00Z"},
			want: "2024-01-01T10:00:00Z\n2024-01-02T10:00:00Z\n",
		},
		{
			name: "no startTime runs at now, taken from the clock",
			job:  `{` + action + `}`,
			want: "2030-01-01T00:00:00Z\n",
		},
		{
			name: "a schedule alone, without an action",
			job:  `{"startTime":"2024-01-31T09:00:00Z","recurrence":{"frequency":"Month","count":3}}`,
			args: []string{"--now", "2023-12-31T00:00:00Z"},
			want: "2024-01-31T09:00:00Z\n2024-03-31T09:00:00Z\n2024-05-31T09:00:00Z\n",
		},
		{
			name: "a resource without an action, its members in other cases",
			job:  `{"Properties":{"StartTime":"2024-01-07T09:00:00Z","Recurrence":{"Frequency":"Week","Interval":2,"Schedule":{"WeekDays":["Monday","Sunday"]}}}}`,
			args: []string{"--now", "2023-12-31T00:00:00Z", "-n", "3"},
			want: "2024-01-07T09:00:00Z\n2024-01-15T09:00:00Z\n2024-01-21T09:00:00Z\n",
		},
		{
			name: "endTime in the past prints nothing",
			job:  `{` + action + `,"recurrence":{"frequency":"Day","endTime":"2020-01-01"}}`,
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runPreviewWith(t, clock, tt.job, append([]string{"-f", "-"}, tt.args...)...)
			if code != 0 || out != tt.want {
				t.Errorf("exit %d, stderr %q\n got %q\nwant %q", code, errOut, out, tt.want)
			}
		})
	}
}

func TestPreviewExampleFiles(t *testing.T) {
	// The examples whose dates are those of a documented case preview at that case's now.
	nowOf := map[string]string{
		"http-weekly-schedule.json": "2012-08-01T00:00:00Z",
		"daily-in-timezone.json":    "2019-03-08T00:00:00Z",
	}
	files, err := filepath.Glob("../../schemas/examples/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			now := nowOf[filepath.Base(f)]
			if now == "" {
				now = "2026-01-01T00:00:00Z"
			}
			code, out, errOut := runPreviewWith(t, time.Now(), "", "-f", f, "-n", "5", "--now", now)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := strings.Fields(out)
			if len(lines) == 0 || len(lines) > 5 {
				t.Fatalf("want 1 to 5 times, got %q", out)
			}
			for _, l := range lines {
				if _, err := time.Parse(time.RFC3339, l); err != nil || !strings.HasSuffix(l, "Z") {
					t.Errorf("line %q is not an RFC 3339 UTC time", l)
				}
			}
		})
	}
}

func TestPreviewRejects(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{`+action+`,"recurrence":{"frequency":"Month","schedule":{"weekDays":["Monday"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		wantInErr string
	}{
		{"invalid definition names the field", []string{"-f", bad}, "recurrence.schedule.weekDays"},
		{"missing -f", []string{"-n", "3"}, "usage"},
		{"missing file", []string{"-f", filepath.Join(t.TempDir(), "none.json")}, "no such file"},
		{"bad --now", []string{"-f", bad, "--now", "yesterday"}, "--now"},
		{"negative -n", []string{"-f", bad, "-n", "-1"}, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runPreviewWith(t, time.Now(), "", tt.args...)
			if code != 2 || out != "" || !strings.Contains(errOut, tt.wantInErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, no output, stderr containing %q", code, out, errOut, tt.wantInErr)
			}
		})
	}
}

// A preview from flags, as `job create` would make the job, and the reason a series ends.
func TestPreviewFromFlagsAndWhyItEnds(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 17, 42, 0, time.UTC) // a Thursday
	for _, c := range []struct {
		args      []string
		out, errs string
	}{
		{[]string{"--every", "15m", "-n", "2"}, "2026-01-01T10:32:00Z\n2026-01-01T10:47:00Z\n", ""},
		{[]string{"--weekdays", "Mon,Fri", "--hours", "9", "--minutes", "30", "--tz", "Europe/Paris", "-n", "2"},
			"2026-01-02T08:30:00Z\n2026-01-05T08:30:00Z\n", ""},
		{[]string{"--hours", "7", "-n", "1"}, "2026-01-02T07:00:00Z\n", ""},
		{[]string{"--monthly", "last-Fri", "--hours", "17", "--tz", "W. Europe Standard Time", "-n", "2"},
			"2026-01-30T16:00:00Z\n2026-02-27T16:00:00Z\n", ""},
		{[]string{"--every", "1d", "--count", "2", "-n", "5"}, "2026-01-02T10:17:00Z\n2026-01-03T10:17:00Z\n", "(no more executions: recurrence.count reached)"},
		{[]string{"--every", "1d", "--until", "2025-01-01T00:00:00Z"}, "", "(no more executions: recurrence.endTime reached)"},
	} {
		code, out, errOut := runPreviewWith(t, now, "", c.args...)
		if code != 0 || out != c.out || !strings.Contains(errOut, c.errs) {
			t.Errorf("preview %v: exit %d\n%s%s\nwant\n%s%s", c.args, code, out, errOut, c.out, c.errs)
		}
	}
	if code, _, errOut := runPreviewWith(t, now, "", "--every", "1d", "-f", "x.json"); code != 2 || !strings.Contains(errOut, "usage") {
		t.Errorf("preview with -f and flags: exit %d, %q", code, errOut)
	}
}
