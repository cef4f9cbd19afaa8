package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// collectionGroup is `schedctl collection`: the job collections on the planner's API.
var collectionGroup = &group{
	name:    "collection",
	summary: "Manage job collections through the planner's NATS API.",
	subs: []subcommand{
		{"create", "NAME [-f FILE|-] [--max-jobs N] [--max-recurrence 1m|1h|FREQUENCY:INTERVAL]",
			"create or replace a collection, from a file or from the flags", collectionCreate},
		{"get", "NAME", "show a collection", collectionGet},
		{"list", "[--top N] [--skip N] [--all]", "list the collections", collectionList},
		{"delete", "NAME", "delete a collection and every job in it", collectionDelete},
		{"enable", "NAME", "resume the collection's jobs", collectionState("enable")},
		{"disable", "NAME", "pause every job of the collection", collectionState("disable")},
	},
}

func collectionCreate(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "collection resource `file`, or - for standard input")
	maxJobs := inv.fs.Int("max-jobs", 0, "quota: at most `N` jobs")
	maxRec := inv.fs.String("max-recurrence", "", "quota: the shortest `recurrence` a job may use: 1m, 30s, 1h, 1d, 1w, 1mo, 1y or FREQUENCY:INTERVAL")
	pos, err := inv.parse(args, 1, 1)
	if err != nil {
		return err
	}
	name := pos[0]
	if err := bus.CheckName("collection", name); err != nil {
		return &usageError{err.Error()}
	}
	var body []byte
	switch {
	case *file != "" && (*maxJobs != 0 || *maxRec != ""):
		return usagef("-f and the quota flags exclude each other: put the quota in the file")
	case *file != "":
		if body, err = inv.readFile(*file); err != nil {
			return err
		}
	default:
		if body, err = collectionFromFlags(*maxJobs, *maxRec); err != nil {
			return err
		}
	}
	msg, err := inv.request(body, "collections", "put", name)
	if err != nil {
		return err
	}
	if !inv.asJSON() {
		fmt.Fprintf(inv.stdout, "collection %s %s\n", name, createdText(msg))
	}
	return show(inv, msg.Data, writeCollection)
}

// collectionFromFlags builds the resource `collection create` sends without -f.
func collectionFromFlags(maxJobs int, maxRec string) ([]byte, error) {
	if maxJobs < 0 {
		return nil, usagef("--max-jobs %d: must be 0 (no limit) or more", maxJobs)
	}
	var c job.Collection
	if maxJobs > 0 || maxRec != "" {
		c.Properties.Quota = &job.Quota{MaxJobCount: maxJobs}
	}
	if maxRec != "" {
		mr, err := parseMaxRecurrence(maxRec)
		if err != nil {
			return nil, &usageError{"--max-recurrence: " + err.Error()}
		}
		c.Properties.Quota.MaxRecurrence = mr
	}
	return json.Marshal(c)
}

// shortRecurrence is "1m", "30s", "2h", "1d", "1w", "1mo" or "1y".
var shortRecurrence = regexp.MustCompile(`^([0-9]+)(s|m|h|d|w|mo|y)$`)

// shortUnits are the units of shortRecurrence.
var shortUnits = map[string]job.Frequency{
	"s": job.Second, "m": job.Minute, "h": job.Hour, "d": job.Day, "w": job.Week, "mo": job.Month, "y": job.Year,
}

// parseMaxRecurrence reads a quota's shortest recurrence: "1m", "Minute", "Minute:5".
func parseMaxRecurrence(s string) (*job.MaxRecurrence, error) {
	var freq, interval string
	if m := shortRecurrence.FindStringSubmatch(strings.ToLower(s)); m != nil {
		interval = m[1]
		f := shortUnits[m[2]]
		freq = f.String()
	} else {
		var ok bool
		if freq, interval, ok = strings.Cut(s, ":"); !ok {
			interval = "1"
		}
	}
	f, err := job.ParseFrequency(freq)
	if err != nil {
		return nil, fmt.Errorf("%q: want 1m, 1h, 1d… or FREQUENCY:INTERVAL such as Minute:5", s)
	}
	n, err := strconv.Atoi(interval)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%q: the interval must be a whole number, 1 or more", s)
	}
	return &job.MaxRecurrence{Frequency: f, Interval: n}, nil
}

func collectionGet(inv *invocation, args []string) error {
	name, err := collectionArg(inv, args)
	if err != nil {
		return err
	}
	msg, err := inv.request(nil, "collections", "get", name)
	if err != nil {
		return err
	}
	return show(inv, msg.Data, writeCollection)
}

func collectionList(inv *invocation, args []string) error {
	p := pagingFlags(inv.fs)
	if _, err := inv.parse(args, 0, 0); err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	raw, reply, err := inv.list(p, listRequest{}, "collections", "list")
	if err != nil {
		return err
	}
	return showList(inv, raw, reply, []string{"NAME", "STATE", "MAX JOBS", "MAX RECURRENCE"},
		func(c job.Collection) []string {
			return []string{c.Name, string(c.Properties.State), countText(maxJobs(c)), maxRecurrenceText(c)}
		})
}

func collectionDelete(inv *invocation, args []string) error {
	name, err := collectionArg(inv, args)
	if err != nil {
		return err
	}
	msg, err := inv.request(nil, "collections", "delete", name)
	if err != nil {
		return err
	}
	if inv.asJSON() {
		return printJSON(inv.stdout, msg.Data)
	}
	fmt.Fprintf(inv.stdout, "collection %s deleted\n", name)
	return nil
}

// collectionState returns enable or disable.
func collectionState(op string) func(inv *invocation, args []string) error {
	return func(inv *invocation, args []string) error {
		name, err := collectionArg(inv, args)
		if err != nil {
			return err
		}
		msg, err := inv.request(nil, "collections", op, name)
		if err != nil {
			return err
		}
		return show(inv, msg.Data, writeCollection)
	}
}

// collectionArg parses the arguments of a subcommand that takes a collection name alone.
func collectionArg(inv *invocation, args []string) (string, error) {
	pos, err := inv.parse(args, 1, 1)
	if err != nil {
		return "", err
	}
	if err := bus.CheckName("collection", pos[0]); err != nil {
		return "", &usageError{err.Error()}
	}
	return pos[0], nil
}

// writeCollection prints a collection as a key: value summary.
func writeCollection(w io.Writer, c job.Collection) {
	sku := ""
	if c.Properties.Sku != nil {
		sku = string(c.Properties.Sku.Name)
	}
	field(w, "Name", c.Name)
	field(w, "State", string(c.Properties.State))
	field(w, "Location", orDash(c.Location))
	field(w, "Plan", orDash(sku))
	field(w, "Max jobs", countText(maxJobs(c)))
	field(w, "Max recurrence", maxRecurrenceText(c))
}

func maxJobs(c job.Collection) int {
	if c.Properties.Quota == nil {
		return 0
	}
	return c.Properties.Quota.MaxJobCount
}

func maxRecurrenceText(c job.Collection) string {
	q := c.Properties.Quota
	if q == nil || q.MaxRecurrence == nil {
		return "-"
	}
	return fmt.Sprintf("%s/%d", q.MaxRecurrence.Frequency, max(q.MaxRecurrence.Interval, 1))
}

// createdText reads a put's Scheduler-Created header.
func createdText(msg *nats.Msg) string {
	if msg.Header.Get(headerCreated) == "false" {
		return "replaced"
	}
	return "created"
}

// headerCreated is set on a put's reply: "true" when the put created the resource.
const headerCreated = "Scheduler-Created"
