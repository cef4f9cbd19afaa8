package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/resched/resched/shared/job"
)

// recurrenceWords says a recurrence in English, as a user would: "every 15 minutes",
// "every Monday and Friday at 09:30 and 17:30 (Europe/Paris)", "every month on the last Friday
// at 17:00, 12 times". It says what the job asks for; the planner's preview gives the times.
func recurrenceWords(r *job.Recurrence) string {
	if r == nil {
		return "once"
	}
	var parts []string
	s := r.Schedule
	if s == nil {
		s = &job.Schedule{}
	}
	parts = append(parts, every(r.Frequency, r.IntervalOrDefault(), s))
	if days := dayWords(r.Frequency, s); days != "" {
		parts[0] += " " + days
	}
	if len(s.Months) > 0 {
		parts[0] += " in " + listWords(monthNames(s.Months))
	}
	if at := timeWords(r.Frequency, s); at != "" {
		parts[0] += " " + at
	}
	if r.TimeZone != "" {
		parts[0] += " (" + r.TimeZone + ")"
	}
	if r.Count > 0 {
		parts = append(parts, plural(r.Count, "time"))
	}
	if r.EndTime != nil {
		parts = append(parts, "until "+r.EndTime.String())
	}
	if r.CatchUpPolicy != "" {
		parts = append(parts, "catch-up "+string(r.CatchUpPolicy))
	}
	return strings.Join(parts, ", ")
}

var unitNames = map[job.Frequency]string{job.Second: "second", job.Minute: "minute", job.Hour: "hour", job.Day: "day",
	job.Week: "week", job.Month: "month", job.Year: "year"}

func every(f job.Frequency, n int, s *job.Schedule) string {
	unit := unitNames[f]
	if f == job.Week && len(s.WeekDays) > 0 && n == 1 {
		return "every" // "every Monday and Friday"
	}
	if n == 1 {
		return "every " + unit
	}
	return fmt.Sprintf("every %d %ss", n, unit)
}

// dayWords names the days: "Monday and Friday", "on the 1st and the last day",
// "on the last Friday".
func dayWords(f job.Frequency, s *job.Schedule) string {
	switch {
	case len(s.WeekDays) > 0:
		var names []string
		for _, d := range s.WeekDays {
			names = append(names, d.String())
		}
		if f == job.Week {
			return listWords(names)
		}
		return "on " + listWords(names)
	case len(s.MonthDays) > 0 || len(s.MonthlyOccurrences) > 0:
		var names []string
		for _, d := range s.MonthDays {
			names = append(names, "the "+ordinal(d)+" day")
		}
		for _, o := range s.MonthlyOccurrences {
			if o.Occurrence == 0 {
				names = append(names, "every "+o.Day.String())
			} else {
				names = append(names, "the "+ordinal(o.Occurrence)+" "+o.Day.String())
			}
		}
		return "on " + listWords(names)
	}
	return ""
}

// timeWords names the times of day: "at 09:30 and 17:30", "at minute 0 and 30 of every hour",
// "at minute 15 of hours 9 to 17".
func timeWords(f job.Frequency, s *job.Schedule) string {
	hours, minutes := []int(s.Hours), []int(s.Minutes)
	switch {
	case len(hours) == 0 && len(minutes) == 0:
		return ""
	case len(hours) > 0 && len(minutes) > 0 && len(hours)*len(minutes) <= 6:
		var at []string
		for _, h := range sorted(hours) {
			for _, m := range sorted(minutes) {
				at = append(at, fmt.Sprintf("%02d:%02d", h, m))
			}
		}
		return "at " + listWords(at)
	}
	var parts []string
	if len(minutes) > 0 {
		parts = append(parts, "at minute "+listWords(numbers(sorted(minutes))))
	}
	if len(hours) > 0 {
		parts = append(parts, "in hour "+listWords(numbers(sorted(hours))))
	} else if f >= job.Day {
		parts = append(parts, "of every hour")
	}
	return strings.Join(parts, " ")
}

func ordinal(n int) string {
	switch {
	case n == -1:
		return "last"
	case n < 0:
		return ordinal(-n) + " to last"
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

func monthNames(ms []int) []string {
	names := []string{"", "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	var out []string
	for _, m := range sorted(ms) {
		if m >= 1 && m <= 12 {
			out = append(out, names[m])
		}
	}
	return out
}

func numbers(ns []int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprint(n)
	}
	return out
}

func sorted(ns []int) []int {
	out := slices.Clone(ns)
	slices.Sort(out)
	return slices.Compact(out)
}

// listWords joins "a", "a and b", "a, b and c".
func listWords(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
