package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
	"github.com/resched/resched/shared/recurrence"
)

// previewCommand returns `schedctl preview` (recurrence.md §10) reading the current time from
// clock, so tests can fix it.
func previewCommand(clock func() time.Time) func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		fs := flag.NewFlagSet("preview", flag.ContinueOnError)
		fs.SetOutput(stderr)
		file := fs.String("f", "", "job definition `file`, or - for standard input (required)")
		nowText := fs.String("now", "", "accept the job at this `time` (RFC 3339; no offset means UTC; default: now)")
		n := fs.Int("n", 10, "print at most `N` executions")
		fs.Usage = func() {
			fmt.Fprintln(stderr, "usage: schedctl preview -f FILE|- [--now TIME] [-n N]")
			fmt.Fprintln(stderr, "Prints the first N executions the planner would make for a job, one RFC 3339 UTC time per line.")
			fs.PrintDefaults()
		}
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if *file == "" || fs.NArg() > 0 || *n < 0 {
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
		times, err := preview(*file, stdin, now, *n)
		if err != nil {
			fmt.Fprintf(stderr, "schedctl preview: %v\n", err)
			return 2
		}
		for _, t := range times {
			fmt.Fprintln(stdout, t.Format(time.RFC3339))
		}
		return 0
	}
}

// preview validates the definition as the planner's intake does and lists its executions.
func preview(file string, stdin io.Reader, now time.Time, n int) ([]time.Time, error) {
	raw, err := readInput(file, stdin)
	if err != nil {
		return nil, err
	}
	def, err := jobschema.Decode(raw)
	if err != nil {
		var verr *jobschema.ValidationError
		if errors.As(err, &verr) {
			var lines strings.Builder
			for _, p := range verr.Problems {
				lines.WriteString("\n  " + p.String())
			}
			return nil, fmt.Errorf("invalid job definition:%s", lines.String())
		}
		return nil, err
	}
	p := def.Properties
	s, err := recurrence.Compile(p.StartTime, p.Recurrence, now)
	if err != nil {
		return nil, err
	}
	return s.Preview(n), nil
}

func readInput(file string, stdin io.Reader) ([]byte, error) {
	if file == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read job definition: %w", err)
	}
	return b, nil
}

// parseInstant reads a time text of recurrence.md §2 as an instant; no offset means UTC.
func parseInstant(s string) (time.Time, error) {
	d, err := job.ParseDateTime(s)
	if err != nil {
		return time.Time{}, err
	}
	return d.UTC(), nil
}
