package main

import (
	"flag"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
)

// jobFlags build a job definition, or a change to one, from flags, as `gcloud scheduler jobs
// create http` does: `--every 15m --http-get URL`, `--weekdays Mon,Fri --hours 9 --minutes 30`.
// They produce the JSON the planner takes and leave every rule to it, so a mistake is named by
// the planner with its JSON path.
type jobFlags struct {
	fs *flag.FlagSet

	every, at, until, tz, catchUp       string
	weekdays, hours, minutes, monthDays string
	monthly, months                     string
	count                               int
	get, post, put, patch, delete, body string
	headers                             listFlag
	retry                               string
	disabled, enabled                   bool
}

// listFlag is a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func addJobFlags(fs *flag.FlagSet) *jobFlags {
	f := &jobFlags{fs: fs}
	fs.StringVar(&f.every, "every", "", "how often: `30s`, 15m, 2h, 1d, 1w, 1mo, 1y")
	fs.StringVar(&f.at, "at", "", "the start `time` (2026-12-01T09:00, with Z or ±hh:mm, or wall time in --tz); default: now, so the first run is the first scheduled time after now")
	fs.StringVar(&f.until, "until", "", "no run after this `time` (recurrence.endTime)")
	fs.IntVar(&f.count, "count", 0, "at most `N` runs")
	fs.StringVar(&f.tz, "tz", "", "time `zone` of the schedule: an IANA name (Europe/Paris) or a Windows one")
	fs.StringVar(&f.weekdays, "weekdays", "", "`days` of the week: Mon,Fri (makes it weekly without --every)")
	fs.StringVar(&f.hours, "hours", "", "`hours` of the day: 9,17")
	fs.StringVar(&f.minutes, "minutes", "", "`minutes` of the hour: 0,30")
	fs.StringVar(&f.monthDays, "month-days", "", "`days` of the month: 1,15,-1 (-1 is the last; makes it monthly without --every)")
	fs.StringVar(&f.monthly, "monthly", "", "weekdays of the month: last-Fri,first-Mon,2-Tue (makes it monthly without --every)")
	fs.StringVar(&f.months, "months", "", "`months`: 1,7 (monthly or yearly schedules)")
	fs.StringVar(&f.catchUp, "catch-up", "", "after an outage of every planner run only the `latest` missed run, or all")
	fs.StringVar(&f.get, "http-get", "", "call `URL` with GET")
	fs.StringVar(&f.post, "http-post", "", "call `URL` with POST")
	fs.StringVar(&f.put, "http-put", "", "call `URL` with PUT")
	fs.StringVar(&f.patch, "http-patch", "", "call `URL` with PATCH")
	fs.StringVar(&f.delete, "http-delete", "", "call `URL` with DELETE")
	fs.StringVar(&f.body, "body", "", "request `body`")
	fs.Var(&f.headers, "header", "request header `Name: value` (repeat for more)")
	fs.StringVar(&f.retry, "retry", "", "retries: `none`, N (30 s apart) or N@INTERVAL such as 3@1m")
	fs.BoolVar(&f.disabled, "disabled", false, "create the job disabled")
	fs.BoolVar(&f.enabled, "enabled", false, "with update: enable the job")
	return f
}

// given reports whether any of the job flags was set.
func (f *jobFlags) given() bool {
	any := false
	f.fs.Visit(func(fl *flag.Flag) {
		if jobFlagNames[fl.Name] {
			any = true
		}
	})
	return any
}

var jobFlagNames = map[string]bool{"every": true, "at": true, "until": true, "count": true, "tz": true, "weekdays": true,
	"hours": true, "minutes": true, "month-days": true, "monthly": true, "months": true, "catch-up": true,
	"http-get": true, "http-post": true, "http-put": true, "http-patch": true, "http-delete": true, "body": true,
	"header": true, "retry": true, "disabled": true, "enabled": true}

// definition is a whole job built from the flags, for create and preview. Without --at it
// starts at the current minute: the first run is the first time of the schedule after now, as
// a user who types --every 15m or --weekdays Mon --hours 9 means it, not the immediate run a
// definition without startTime makes (docs/recurrence.md §7); and on a whole minute, since every
// run takes the start's second (§6), and 09:30 should not run at 09:30:40.
func (f *jobFlags) definition(needAction bool, now time.Time) (map[string]any, error) {
	p, err := f.patchOf()
	if err != nil {
		return nil, err
	}
	if p["startTime"] == nil && p["recurrence"] != nil {
		p["startTime"] = now.UTC().Truncate(time.Minute).Format(time.RFC3339)
	}
	if rec, ok := p["recurrence"].(map[string]any); ok {
		if rec["frequency"] == nil {
			rec["frequency"] = impliedFrequency(rec)
		}
		// --hours 7 means 07:00; the rules would take the start's minute (§6).
		if sched, ok := rec["schedule"].(map[string]any); ok && sched["hours"] != nil && sched["minutes"] == nil {
			sched["minutes"] = []int{0}
		}
	}
	if needAction && p["action"] == nil {
		return nil, usagef("the job needs an action: give --http-get URL (or --http-post, --http-put, --http-patch, --http-delete), or -f FILE")
	}
	if rec, ok := p["recurrence"].(map[string]any); ok && rec["frequency"] == "" {
		return nil, usagef("the schedule flags need a frequency: add --every (15m, 1d…), or --weekdays, --month-days, --monthly or --hours")
	}
	return p, nil
}

// impliedFrequency is the period the schedule flags of a new job say without --every, as a
// user means them: weekdays make it weekly, days of the month monthly, months yearly, hours or
// minutes alone daily; "" when nothing says.
func impliedFrequency(rec map[string]any) string {
	sched, _ := rec["schedule"].(map[string]any)
	switch {
	case sched["weekDays"] != nil:
		return "Week"
	case sched["monthDays"] != nil, sched["monthlyOccurrences"] != nil:
		return "Month"
	case sched["months"] != nil:
		return "Year"
	case sched["hours"] != nil, sched["minutes"] != nil:
		return "Day"
	}
	return ""
}

// patchOf is what the flags set, as a JSON merge patch of the job's properties.
func (f *jobFlags) patchOf() (map[string]any, error) {
	p := map[string]any{}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["at"] {
		p["startTime"] = f.at
	}
	if f.disabled && f.enabled {
		return nil, usagef("--disabled and --enabled exclude each other")
	}
	if f.disabled {
		p["state"] = "Disabled"
	} else if f.enabled {
		p["state"] = "Enabled"
	}
	rec, err := f.recurrence(set)
	if err != nil {
		return nil, err
	}
	if len(rec) > 0 {
		p["recurrence"] = rec
	}
	action, err := f.action(set)
	if err != nil {
		return nil, err
	}
	if len(action) > 0 {
		p["action"] = action
	}
	return p, nil
}

func (f *jobFlags) recurrence(set map[string]bool) (map[string]any, error) {
	rec := map[string]any{}
	sched := map[string]any{}
	if set["every"] {
		freq, interval, err := parseEvery(f.every)
		if err != nil {
			return nil, &usageError{"--every: " + err.Error()}
		}
		rec["frequency"], rec["interval"] = freq.String(), interval
	}
	lists := []struct {
		name, key string
		read      func(string) (any, error)
	}{
		{"weekdays", "weekDays", parseWeekdays}, {"hours", "hours", parseInts}, {"minutes", "minutes", parseInts},
		{"month-days", "monthDays", parseInts}, {"monthly", "monthlyOccurrences", parseMonthly}, {"months", "months", parseInts},
	}
	for _, l := range lists {
		if !set[l.name] {
			continue
		}
		text := map[string]string{"weekdays": f.weekdays, "hours": f.hours, "minutes": f.minutes,
			"month-days": f.monthDays, "monthly": f.monthly, "months": f.months}[l.name]
		v, err := l.read(text)
		if err != nil {
			return nil, &usageError{"--" + l.name + ": " + err.Error()}
		}
		sched[l.key] = v
	}
	if len(sched) > 0 {
		rec["schedule"] = sched
	}
	if set["count"] {
		rec["count"] = f.count
	}
	if set["until"] {
		rec["endTime"] = f.until
	}
	if set["tz"] {
		rec["timeZone"] = f.tz
	}
	if set["catch-up"] {
		rec["catchUpPolicy"] = f.catchUp
	}
	return rec, nil
}

func (f *jobFlags) action(set map[string]bool) (map[string]any, error) {
	req := map[string]any{}
	for _, m := range []struct{ flag, method, uri string }{
		{"http-get", "GET", f.get}, {"http-post", "POST", f.post}, {"http-put", "PUT", f.put},
		{"http-patch", "PATCH", f.patch}, {"http-delete", "DELETE", f.delete},
	} {
		if !set[m.flag] {
			continue
		}
		if req["method"] != nil {
			return nil, usagef("give one of --http-get, --http-post, --http-put, --http-patch, --http-delete")
		}
		req["method"], req["uri"] = m.method, m.uri
	}
	if set["body"] {
		req["body"] = f.body
	}
	if len(f.headers) > 0 {
		h := map[string]any{}
		for _, line := range f.headers {
			name, value, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(name) == "" {
				return nil, usagef("--header %q: write it as Name: value", line)
			}
			h[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
		req["headers"] = h
	}
	action := map[string]any{}
	if len(req) > 0 {
		action["request"] = req
		if uri, ok := req["uri"].(string); ok {
			action["type"] = "Http"
			if u, err := url.Parse(uri); err == nil && strings.EqualFold(u.Scheme, "https") {
				action["type"] = "Https"
			}
		}
	}
	if set["retry"] {
		policy, err := parseRetry(f.retry)
		if err != nil {
			return nil, &usageError{"--retry: " + err.Error()}
		}
		action["retryPolicy"] = policy
	}
	return action, nil
}

// everyText is "30s", "15m", "2h", "1d", "1w", "1mo" or "1y".
var everyText = regexp.MustCompile(`^([0-9]+)(s|m|h|d|w|mo|y)$`)

var everyUnits = map[string]job.Frequency{
	"s": job.Second, "m": job.Minute, "h": job.Hour, "d": job.Day, "w": job.Week, "mo": job.Month, "y": job.Year,
}

func parseEvery(s string) (job.Frequency, int, error) {
	m := everyText.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, 0, fmt.Errorf("%q: want a number and a unit: 30s, 15m, 2h, 1d, 1w, 1mo or 1y", s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return 0, 0, fmt.Errorf("%q: the number must be 1 or more", s)
	}
	return everyUnits[m[2]], n, nil
}

func parseInts(s string) (any, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", strings.TrimSpace(part))
		}
		out = append(out, n)
	}
	return out, nil
}

func parseWeekdays(s string) (any, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		d, err := parseDay(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, d.String())
	}
	return out, nil
}

// parseDay reads a weekday by its name or its first three letters, any case.
func parseDay(s string) (job.Weekday, error) {
	if d, err := job.ParseWeekday(s); err == nil {
		return d, nil
	}
	for d := job.Weekday(0); d < 7; d++ {
		if len(s) >= 2 && strings.HasPrefix(strings.ToLower(d.String()), strings.ToLower(s)) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%q is not a day of the week (Mon, Tue… or Monday, Tuesday…)", s)
}

var occurrenceWords = map[string]int{"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}

// parseMonthly reads "last-Fri,first-Mon,2-Tue,Wed" (Wed alone: every Wednesday).
func parseMonthly(s string) (any, error) {
	var out []map[string]any
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		occ, day, ok := strings.Cut(part, "-")
		if !ok {
			occ, day = "", part
		}
		d, err := parseDay(day)
		if err != nil {
			return nil, err
		}
		entry := map[string]any{"day": d.String()}
		if occ != "" {
			n, known := occurrenceWords[strings.ToLower(occ)]
			if !known {
				if n, err = strconv.Atoi(occ); err != nil {
					return nil, fmt.Errorf("%q: write first-Mon, last-Fri or 2-Tue", part)
				}
			}
			entry["occurrence"] = n
		}
		out = append(out, entry)
	}
	return out, nil
}

// parseRetry reads "none", "N" or "N@INTERVAL" (a Go duration: 30s, 1m).
func parseRetry(s string) (map[string]any, error) {
	if strings.EqualFold(s, "none") {
		return map[string]any{"retryType": "None"}, nil
	}
	count, interval, hasInterval := strings.Cut(s, "@")
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%q: write none, a number of retries (3) or retries and interval (3@1m)", s)
	}
	policy := map[string]any{"retryType": "Fixed", "retryCount": n}
	if hasInterval {
		d, err := time.ParseDuration(interval)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q: the interval is a duration such as 30s or 1m", interval)
		}
		// ISO 8601, the swagger's form: the one clients generated from it read back.
		policy["retryInterval"] = job.DurationOf(d).ISO()
	}
	return policy, nil
}
