package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// collectionGroup is `schedctl collection`: the job collections on the planner's API.
var collectionGroup = &group{
	name:    "collection",
	summary: "Manage job collections through the planner's NATS API.",
	subs: []subcommand{
		{"create", "NAME [-f FILE|-] [--max-jobs N] [--max-recurrence 1m|1h|FREQUENCY:INTERVAL] [--plan PLAN]",
			"create a collection, from a file or from the flags; an existing one is left alone", collectionCreate},
		{"update", "NAME [-f FILE|-] [--max-jobs N] [--max-recurrence R] [--plan PLAN]",
			"change a collection's quota or plan (or replace it with a file)", collectionUpdate},
		{"get", "NAME", "show a collection", collectionGet},
		{"list", "[--filter EXPR]... [--top N] [--skip N] [--all]", "list the collections", collectionList},
		{"delete", "NAME [--yes]", "delete a collection and every job in it (asks first)", collectionDelete},
		{"enable", "NAME", "resume the collection's jobs", collectionState("enable")},
		{"disable", "NAME", "pause every job of the collection", collectionState("disable")},
	},
}

// quotaFlags are the flags of a collection's quota and plan.
type quotaFlags struct {
	maxJobs       *int
	maxRecurrence *string
	plan          *string
}

func addQuotaFlags(inv *invocation) quotaFlags {
	return quotaFlags{
		maxJobs:       inv.fs.Int("max-jobs", 0, "quota: at most `N` jobs (0: no limit)"),
		maxRecurrence: inv.fs.String("max-recurrence", "", "quota: the shortest `recurrence` a job may use: 1m, 30s, 1h, 1d, 1w, 1mo, 1y or FREQUENCY:INTERVAL"),
		plan:          inv.fs.String("plan", "", "the `plan`: Free, Standard, P10Premium or P20Premium"),
	}
}

func (q quotaFlags) given(inv *invocation) bool {
	any := false
	inv.fs.Visit(func(f *flag.Flag) {
		any = any || f.Name == "max-jobs" || f.Name == "max-recurrence" || f.Name == "plan"
	})
	return any
}

// apply sets what the flags give on a collection.
func (q quotaFlags) apply(inv *invocation, c *job.Collection) error {
	set := map[string]bool{}
	inv.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["max-jobs"] || set["max-recurrence"] {
		if c.Properties.Quota == nil {
			c.Properties.Quota = &job.Quota{}
		}
	}
	if set["max-jobs"] {
		if *q.maxJobs < 0 {
			return usagef("--max-jobs %d: must be 0 (no limit) or more", *q.maxJobs)
		}
		c.Properties.Quota.MaxJobCount = *q.maxJobs
	}
	if set["max-recurrence"] {
		mr, err := parseMaxRecurrence(*q.maxRecurrence)
		if err != nil {
			return &usageError{"--max-recurrence: " + err.Error()}
		}
		c.Properties.Quota.MaxRecurrence = mr
	}
	if set["plan"] {
		name, err := job.ParseSkuName(*q.plan)
		if err != nil {
			return &usageError{"--plan: " + err.Error()}
		}
		c.Properties.Sku = &job.Sku{Name: name}
	}
	return nil
}

func collectionCreate(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "collection resource `file`, or - for standard input")
	q := addQuotaFlags(inv)
	name, err := collectionArg(inv, args)
	if err != nil {
		return err
	}
	var body []byte
	switch {
	case *file != "" && q.given(inv):
		return usagef("-f and the quota flags exclude each other: put the quota in the file")
	case *file != "":
		if body, err = inv.readFile(*file); err != nil {
			return err
		}
	default:
		var c job.Collection
		if err := q.apply(inv, &c); err != nil {
			return err
		}
		if body, err = json.Marshal(c); err != nil {
			return err
		}
	}
	msg, err := inv.requestMsg(body, map[string]string{headerIfNoneMatch: "*"}, "collections", "put", name)
	if err != nil {
		return err
	}
	if !inv.structured() {
		fmt.Fprintf(inv.stdout, "collection %s created\n", name)
	}
	return show(inv, msg.Data, writeCollection)
}

// collectionUpdate changes a collection's quota or plan, keeping the rest; with -f it replaces
// the collection with the file.
func collectionUpdate(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "collection resource `file`, or - for standard input: replaces the collection")
	q := addQuotaFlags(inv)
	name, err := collectionArg(inv, args)
	if err != nil {
		return err
	}
	var body []byte
	switch {
	case *file != "" && q.given(inv):
		return usagef("-f and the quota flags exclude each other")
	case *file != "":
		if body, err = inv.readFile(*file); err != nil {
			return err
		}
	case !q.given(inv):
		return usagef("nothing to change: give --max-jobs, --max-recurrence or --plan, or -f FILE")
	default:
		msg, err := inv.request(nil, "collections", "get", name)
		if err != nil {
			return err
		}
		var c job.Collection
		if err := json.Unmarshal(msg.Data, &c); err != nil {
			return fmt.Errorf("decode the planner's reply: %w", err)
		}
		if err := q.apply(inv, &c); err != nil {
			return err
		}
		if body, err = json.Marshal(c); err != nil {
			return err
		}
	}
	msg, err := inv.request(body, "collections", "put", name)
	if err != nil {
		return err
	}
	if !inv.structured() {
		fmt.Fprintf(inv.stdout, "collection %s updated\n", name)
	}
	return show(inv, msg.Data, writeCollection)
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
	filters := filterFlags(inv.fs)
	p := pagingFlags(inv.fs)
	if _, err := inv.parse(args, 0, 0); err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	match, err := filters.compile([]string{"name", "state", "plan"})
	if err != nil {
		return err
	}
	_, reply, err := inv.list(p, listRequest{}, "collections", "list")
	if err != nil {
		return err
	}
	kept, last := reply.Value[:0], ""
	for _, raw := range reply.Value {
		var c job.Collection
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("decode the planner's reply: %w", err)
		}
		// The listing is in name order. During a rolling upgrade a planner of the earlier
		// release ignores the cursor and answers from the first collection again: --all passes
		// over what it listed already.
		if p.all && last != "" && c.Name <= last {
			continue
		}
		last = c.Name
		if match(map[string]string{"name": c.Name, "state": string(c.Properties.State), "plan": planOf(c)}) {
			kept = append(kept, raw)
		}
	}
	reply.Value = kept
	if filters.given() {
		reply.Count = nil // the planners count every collection, not those that match
	}
	raw, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	none := "No collections yet: schedctl collection create NAME makes one."
	if filters.given() {
		none = "No collection matches."
	}
	return showList(inv, raw, reply, none, []string{"NAME", "STATE", "PLAN", "MAX JOBS", "MAX RECURRENCE"},
		func(c job.Collection) []string {
			return []string{c.Name, string(c.Properties.State), orDash(planOf(c)), countText(maxJobs(c)), maxRecurrenceText(c)}
		})
}

func collectionDelete(inv *invocation, args []string) error {
	yes := yesFlag(inv.fs)
	name, err := collectionArg(inv, args)
	if err != nil {
		return err
	}
	if err := inv.confirm(*yes, fmt.Sprintf("Delete collection %s and every job in it, with their history?", name)); err != nil {
		return err
	}
	msg, err := collectionWork(inv, "delete", name)
	if err != nil {
		return err
	}
	if inv.structured() {
		return inv.print(msg.Data)
	}
	fmt.Fprintf(inv.stdout, "collection %s deleted\n", name)
	return nil
}

// collectionWorkWait is how long a collection's delete, enable or disable waits for the planner
// without --timeout: the planner goes through a large collection's jobs 1,000 at a time
// (about 13 s to enable 300,000), and said nothing answered while it went on.
const collectionWorkWait = 2 * time.Minute

// collectionWork asks for a collection's delete, enable or disable, waiting collectionWorkWait
// for the answer unless --timeout is given. Past the wait, the change may well be under way
// (a large collection, or a planner stopped in the middle, whose change another planner
// finishes): the error says so and where to look.
func collectionWork(inv *invocation, op, name string) (*nats.Msg, error) {
	if err := inv.waitLonger(collectionWorkWait); err != nil {
		return nil, err
	}
	msg, err := inv.request(nil, "collections", op, name)
	if np := (*noPlannerError)(nil); errors.As(err, &np) && np.waited > 0 {
		return nil, fmt.Errorf("%w\nthe %s may still be under way (one whose planner stopped is finished by another): "+
			"schedctl cluster status lists the collections' changes under way", err, op)
	}
	return msg, err
}

// collectionState returns enable or disable.
func collectionState(op string) func(inv *invocation, args []string) error {
	return func(inv *invocation, args []string) error {
		name, err := collectionArg(inv, args)
		if err != nil {
			return err
		}
		msg, err := collectionWork(inv, op, name)
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
	field(w, "Name", c.Name)
	field(w, "State", string(c.Properties.State))
	field(w, "Location", orDash(c.Location))
	field(w, "Plan", orDash(planOf(c)))
	field(w, "Max jobs", countText(maxJobs(c)))
	field(w, "Max recurrence", maxRecurrenceText(c))
}

func planOf(c job.Collection) string {
	if c.Properties.Sku == nil {
		return ""
	}
	return string(c.Properties.Sku.Name)
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

// The API's headers: headerCreated is set on a put's reply ("true" when the put created the
// resource); headerIfNoneMatch "*" on a put makes it create-only.
const (
	headerCreated     = "Scheduler-Created"
	headerIfNoneMatch = "If-None-Match"
)
