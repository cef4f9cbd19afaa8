package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
	"github.com/resched/resched/shared/recurrence"
)

// previewCommand returns `schedctl preview` (docs/recurrence.md §10) reading the current time from
// clock, so tests can fix it.
func previewCommand(clock func() time.Time) func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		fs := flag.NewFlagSet("preview", flag.ContinueOnError)
		fs.SetOutput(stderr)
		file := fs.String("f", "", "job definition `file`, or - for standard input")
		nowText := fs.String("now", "", "accept the job at this `time` (RFC 3339; no offset means UTC; default: now)")
		n := fs.Int("n", 10, "print at most `N` executions")
		flags := addJobFlags(fs)
		fs.Usage = func() {
			fmt.Fprintln(stderr, "usage: schedctl preview (-f FILE|- | --every 15m --weekdays Mon ...) [--now TIME] [-n N]")
			fmt.Fprintln(stderr, "Prints the first N executions the planner would make for a job, one RFC 3339 UTC time per line,")
			fmt.Fprintln(stderr, "and on standard error why there are fewer, when the series ends. The file's action may be left out.")
			fs.PrintDefaults()
		}
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if (*file == "") == !flags.given() || fs.NArg() > 0 || *n < 0 {
			fs.Usage()
			return 2
		}
		now := clock()
		if *nowText != "" {
			t, err := parseInstant(*nowText)
			if err != nil {
				fmt.Fprintf(stderr, "schedctl preview: --now: %v\n", err)
				return 2
			}
			now = t
		}
		var raw []byte
		var err error
		if *file != "" {
			raw, err = readText(*file, stdin)
		} else {
			raw, err = previewFromFlags(flags, now)
		}
		if err != nil {
			fmt.Fprintf(stderr, "schedctl preview: %v\n", err)
			return 2
		}
		times, reason, err := preview(raw, now, *n)
		if err != nil {
			fmt.Fprintf(stderr, "schedctl preview: %v\n", err)
			return 2
		}
		for _, t := range times {
			fmt.Fprintln(stdout, t.Format(time.RFC3339))
		}
		if reason != recurrence.NotDone {
			fmt.Fprintf(stderr, "(no more executions: %s)\n", reason)
		}
		return 0
	}
}

// previewFromFlags is the job the flags describe; without an action flag it has none, which a
// preview does not need.
func previewFromFlags(flags *jobFlags, now time.Time) ([]byte, error) {
	def, err := flags.definition(false, now)
	if err != nil {
		return nil, err
	}
	return json.Marshal(def)
}

// preview validates the definition as the planner's intake does (its action may be left out)
// and lists its executions, and why there are fewer than n.
func preview(raw []byte, now time.Time, n int) ([]time.Time, recurrence.Reason, error) {
	def, err := jobschema.DecodeToPreview(raw)
	if err != nil {
		var verr *jobschema.ValidationError
		if errors.As(err, &verr) {
			var lines strings.Builder
			for _, p := range verr.Problems {
				lines.WriteString("\n  " + p.String())
			}
			return nil, 0, fmt.Errorf("invalid job definition:%s", lines.String())
		}
		return nil, 0, err
	}
	p := def.Properties
	s, err := recurrence.Compile(p.StartTime, p.Recurrence, now)
	if err != nil {
		return nil, 0, err
	}
	times, reason := s.Upcoming(n)
	return times, reason, nil
}

// parseInstant reads a time text of docs/recurrence.md §2 as an instant; no offset means UTC.
func parseInstant(s string) (time.Time, error) {
	d, err := job.ParseDateTime(s)
	if err != nil {
		return time.Time{}, err
	}
	return d.UTC(), nil
}
