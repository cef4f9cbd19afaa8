package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
	"sigs.k8s.io/yaml"
)

// watchInterval is how often `job history --watch` asks for the latest attempts.
const watchInterval = time.Second

// minWatchInterval is the shortest --interval: a look reads up to watchedPage entries.
const minWatchInterval = 100 * time.Millisecond

// checkInterval refuses an --interval without --watch, or shorter than minWatchInterval.
func checkInterval(inv *invocation, watch bool, interval time.Duration) error {
	switch {
	case inv.given("interval") && !watch:
		return usagef("--interval goes with --watch")
	case interval < minWatchInterval:
		return usagef("--interval %v: must be at least %v", interval, minWatchInterval)
	}
	return nil
}

// watchTop is how many of the latest attempts --watch shows first, without --top.
const watchTop = 10

// watchedPage is the most attempts one look at the history reads. More than that recorded
// within one interval (a job firing many times a second) shows as a gap, said once.
const watchedPage = 100

// historyWatch follows a job's history as tail -f follows a file: the latest attempts oldest
// first, then each attempt as the planners record it. It asks the history API every
// watchInterval rather than listening to the workers' results: it shows what the history
// keeps (the target's answer masked and cut), and anyone who may read a job's history may
// watch it, without a subscription their NATS permissions may not allow.
type historyWatch struct {
	inv           *invocation
	coll, job     string
	status        string
	first         int             // how many of the latest attempts the first look shows
	interval      time.Duration   // between looks
	seen          map[string]bool // the attempts of the last look, by ID; nil before the first
	headerPrinted bool
}

// run prints until ctx ends (Ctrl-C), then returns nil. A first look that fails ends it, as
// any command's request would, and so does a planner's refusal later (the job deleted
// meanwhile); a planner that stops answering for a while is said once and asked again.
func (w *historyWatch) run(ctx context.Context) error {
	if err := w.look(); err != nil {
		return err
	}
	said := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.interval):
		}
		err := w.look()
		var answered *apiError
		switch {
		case errors.As(err, &answered):
			return err
		case err == nil:
			said = ""
		case err.Error() != said:
			said = err.Error()
			fmt.Fprintf(w.inv.stderr, "schedctl: %v (still watching)\n", err)
		}
	}
}

// look reads the latest attempts and prints those it has not printed, oldest first.
func (w *historyWatch) look() error {
	top := max(watchedPage, w.first)
	_, reply, err := w.inv.list(&paging{top: top}, listRequest{Status: w.status}, "jobs", "history", w.coll, w.job)
	if err != nil {
		return err
	}
	entries := make([]watchedEntry, len(reply.Value))
	for i, raw := range reply.Value {
		entries[i].raw = raw
		if err := json.Unmarshal(raw, &entries[i].HistoryEntry); err != nil {
			return fmt.Errorf("decode the planner's reply: %w", err)
		}
	}
	slices.Reverse(entries) // oldest first
	seen := make(map[string]bool, len(entries))
	var fresh []watchedEntry
	overlap := false
	for _, e := range entries {
		k := e.ID()
		seen[k] = true
		if w.seen[k] {
			overlap = true
		} else {
			fresh = append(fresh, e)
		}
	}
	if len(w.seen) > 0 && !overlap && len(entries) == top {
		fmt.Fprintf(w.inv.stderr, "schedctl: more than %d attempts recorded since the last look; earlier ones not shown (see job history)\n", top)
	}
	if w.seen == nil {
		fresh = fresh[max(0, len(fresh)-w.first):] // the first look shows the latest few
	}
	w.seen = seen
	return w.print(fresh)
}

// watchedEntry is a history entry as read and as the planner sent it (for -o json and yaml).
type watchedEntry struct {
	job.HistoryEntry
	raw json.RawMessage
}

// print writes attempts as they come: table rows in fixed columns (a table's columns cannot
// be measured before its rows are known), one JSON object a line, or YAML documents.
func (w *historyWatch) print(entries []watchedEntry) error {
	out := w.inv.stdout
	switch w.inv.output {
	case "json":
		for _, e := range entries {
			var b bytes.Buffer
			if err := json.Compact(&b, e.raw); err != nil {
				return fmt.Errorf("the planner's reply is not JSON: %w", err)
			}
			fmt.Fprintf(out, "%s\n", b.Bytes())
		}
	case "yaml":
		for _, e := range entries {
			y, err := yaml.JSONToYAML(e.raw)
			if err != nil {
				return fmt.Errorf("the planner's reply is not JSON: %w", err)
			}
			fmt.Fprintf(out, "---\n%s", y)
		}
	default:
		if !w.headerPrinted {
			watchRow(w.inv, "EXPECTED", "ACTION", "ATTEMPT", "STATUS", "STARTED", "MESSAGE")
			w.headerPrinted = true
		}
		for _, e := range entries {
			watchRow(w.inv, historyCells(e.HistoryEntry)...)
		}
	}
	return nil
}

// watchWidths are the history table's columns but the last: a time to the millisecond, the
// longest action name and status.
var watchWidths = []int{24, 11, 7, 9, 24}

func watchRow(inv *invocation, cells ...string) {
	var b strings.Builder
	for i, c := range cells {
		c = oneLine(c)
		if i < len(watchWidths) {
			c += strings.Repeat(" ", max(0, watchWidths[i]-len([]rune(c)))+2)
		}
		b.WriteString(c)
	}
	fmt.Fprintln(inv.stdout, b.String())
}
