package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// jobGroup is `schedctl job`: jobs and their history on the planner's API.
var jobGroup = &group{
	name:    "job",
	summary: "Manage jobs through the planner's NATS API. A job is named COLLECTION/JOB (or COLLECTION JOB).",
	subs: []subcommand{
		{"create", "COLLECTION/JOB (-f FILE|- | --every 15m --http-get URL ...)",
			"create a job from its definition or from flags; an existing job is left alone", jobCreate},
		{"put", "COLLECTION/JOB -f FILE|-", "create or replace a job from its definition (a replaced job's schedule starts again)", jobPut},
		{"update", "COLLECTION/JOB (--every 1h --hours 9 ... | -f PATCH|-)", "change part of a job: what the flags set, or a JSON merge patch", jobUpdate},
		{"patch", "COLLECTION/JOB -f PATCH|-", "apply a JSON merge patch to a job (null removes a member)", jobPatch},
		{"get", "COLLECTION/JOB", "show a job and its status", jobGet},
		{"describe", "COLLECTION/JOB [-n N]", "show a job, its next N runs (5) and its last N results", jobDescribe},
		{"list", "[COLLECTION] [--state STATE] [--filter EXPR]... [--top N] [--skip N] [--all]",
			"list the jobs of a collection, or of every collection", jobList},
		{"delete", "COLLECTION/JOB [--yes]", "delete a job and its history (asks first)", jobDelete},
		{"enable", "COLLECTION/JOB", "resume a disabled job", jobState(job.StateEnabled)},
		{"disable", "COLLECTION/JOB", "pause a job", jobState(job.StateDisabled)},
		{"run", "COLLECTION/JOB", "run one occurrence now, outside the schedule", jobRun},
		{"history", "COLLECTION/JOB [--status Completed|Failed|Postponed|Skipped] [--top N] [--skip N] [--all] [--watch]",
			"list a job's attempts, newest first; --watch follows them as they are recorded", jobHistory},
		{"publish", "COLLECTION/JOB (-f FILE|- | --delete)",
			"put (or delete) a job through the durable intake stream: applied even while no planner runs", jobPublish},
		{"import", "[COLLECTION] PATH... [--journal FILE] [--create-only]",
			"load many jobs: an Azure export (az scheduler job list, the REST listing) or folders of definitions; run it again to resume", jobImport},
	},
}

// jobCreate creates a job from a file or from flags, and refuses to replace one.
func jobCreate(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "job definition `file`, or - for standard input")
	flags := addJobFlags(inv.fs)
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	body, err := definitionFrom(inv, *file, flags)
	if err != nil {
		return err
	}
	msg, err := inv.requestMsg(body, map[string]string{headerIfNoneMatch: "*"}, "jobs", "put", c, j)
	if err != nil {
		return err
	}
	if !inv.structured() {
		fmt.Fprintf(inv.stdout, "job %s/%s created\n", c, j)
	}
	return inv.showJob(msg.Data)
}

// definitionFrom reads a definition from -f, or builds it from the job flags; not both.
func definitionFrom(inv *invocation, file string, flags *jobFlags) ([]byte, error) {
	switch {
	case file != "" && flags.given():
		return nil, usagef("-f and the job flags exclude each other: put everything in the file, or give flags only")
	case file != "":
		return inv.readFile(file)
	case !flags.given():
		return nil, usagef("give the job: -f FILE, or flags such as --every 15m --http-get URL")
	}
	def, err := flags.definition(true, time.Now())
	if err != nil {
		return nil, err
	}
	return json.Marshal(def)
}

func jobPut(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "job definition `file`, or - for standard input (required)")
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	if *file == "" {
		return usagef("-f is required")
	}
	body, err := inv.readFile(*file)
	if err != nil {
		return err
	}
	msg, err := inv.request(body, "jobs", "put", c, j)
	if err != nil {
		return err
	}
	if !inv.structured() {
		fmt.Fprintf(inv.stdout, "job %s/%s %s\n", c, j, createdText(msg))
	}
	if msg.Header.Get(headerCreated) == "false" {
		fmt.Fprintln(inv.stderr, "note: a put replaces the whole job: its schedule starts again now, and without a state it is Enabled; `schedctl job update` changes a part")
	}
	return inv.showJob(msg.Data)
}

// jobUpdate changes a part of a job: what its flags set, or a merge patch from -f.
func jobUpdate(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "JSON merge patch `file`, or - for standard input")
	flags := addJobFlags(inv.fs)
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	var body []byte
	switch {
	case *file != "" && flags.given():
		return usagef("-f and the job flags exclude each other")
	case *file != "":
		if body, err = inv.readFile(*file); err != nil {
			return err
		}
	case !flags.given():
		return usagef("nothing to change: give flags such as --every 1h or --hours 9, or -f PATCH")
	default:
		patch, err := flags.patchOf()
		if err != nil {
			return err
		}
		if body, err = json.Marshal(patch); err != nil {
			return err
		}
	}
	return inv.patchJob(c, j, body)
}

func jobPatch(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "JSON merge patch `file`, or - for standard input (required)")
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	if *file == "" {
		return usagef("-f is required")
	}
	body, err := inv.readFile(*file)
	if err != nil {
		return err
	}
	return inv.patchJob(c, j, body)
}

func (inv *invocation) patchJob(c, j string, body []byte) error {
	msg, err := inv.request(body, "jobs", "patch", c, j)
	if err != nil {
		return err
	}
	if !inv.structured() {
		fmt.Fprintf(inv.stdout, "job %s/%s updated\n", c, j)
	}
	return inv.showJob(msg.Data)
}

func jobGet(inv *invocation, args []string) error {
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	msg, err := inv.request(nil, "jobs", "get", c, j)
	if err != nil {
		return err
	}
	return inv.showJob(msg.Data)
}

// showJob prints a job's reply: as the planner sent it (-o json, yaml) or as a summary with its
// effective state, which needs its collection's state.
func (inv *invocation) showJob(data []byte) error {
	if inv.structured() {
		return inv.print(data)
	}
	var d job.Definition
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("decode the planner's reply: %w", err)
	}
	c, _, _ := strings.Cut(d.Name, "/")
	paused, err := inv.collectionPaused(c)
	if err != nil {
		return err
	}
	tw := newTable(inv.stdout)
	writeJob(tw, d, paused)
	return tw.Flush()
}

// collectionPaused asks whether a collection holds its jobs back (Disabled or Suspended).
func (inv *invocation) collectionPaused(c string) (bool, error) {
	msg, err := inv.request(nil, "collections", "get", c)
	if err != nil {
		return false, err
	}
	var coll job.Collection
	if err := json.Unmarshal(msg.Data, &coll); err != nil {
		return false, fmt.Errorf("decode the planner's reply: %w", err)
	}
	return coll.Properties.State.Pauses(), nil
}

func jobDescribe(inv *invocation, args []string) error {
	n := inv.fs.Int("n", 5, "show the next `N` runs and the last N results")
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	if *n < 1 {
		return usagef("-n %d: must be 1 or more", *n)
	}
	got, err := inv.request(nil, "jobs", "get", c, j)
	if err != nil {
		return err
	}
	runsBody, _ := json.Marshal(map[string]int{"count": *n})
	runs, err := inv.request(runsBody, "jobs", "runs", c, j)
	if err != nil {
		return err
	}
	histBody, _ := json.Marshal(map[string]int{"top": *n})
	hist, err := inv.request(histBody, "jobs", "history", c, j)
	if err != nil {
		return err
	}
	if inv.structured() {
		return inv.print([]byte(fmt.Sprintf(`{"job":%s,"nextRuns":%s,"history":%s}`, got.Data, runs.Data, hist.Data)))
	}
	if err := inv.showJob(got.Data); err != nil {
		return err
	}
	var next struct {
		Value  []time.Time `json:"value"`
		Reason string      `json:"reason"`
	}
	if err := json.Unmarshal(runs.Data, &next); err != nil {
		return fmt.Errorf("decode the planner's reply: %w", err)
	}
	fmt.Fprintln(inv.stdout, "\nNext runs:")
	for _, t := range next.Value {
		fmt.Fprintf(inv.stdout, "  %s\n", timeText(&t))
	}
	if next.Reason != "" {
		fmt.Fprintf(inv.stdout, "  (no more: %s)\n", next.Reason)
	}
	var last listReply
	if err := json.Unmarshal(hist.Data, &last); err != nil {
		return fmt.Errorf("decode the planner's reply: %w", err)
	}
	fmt.Fprintln(inv.stdout, "\nLast results:")
	if len(last.Value) == 0 {
		fmt.Fprintln(inv.stdout, "  (none yet)")
		return nil
	}
	tw := newTable(inv.stdout)
	for _, raw := range last.Value {
		var e job.HistoryEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("decode the planner's reply: %w", err)
		}
		cells := historyCells(e)
		cells[0] = "  " + cells[0]
		row(tw, cells...)
	}
	return tw.Flush()
}

func jobDelete(inv *invocation, args []string) error {
	yes := yesFlag(inv.fs)
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	if err := inv.confirm(*yes, fmt.Sprintf("Delete job %s/%s and its history?", c, j)); err != nil {
		return err
	}
	msg, err := inv.request(nil, "jobs", "delete", c, j)
	if err != nil {
		return err
	}
	if inv.structured() {
		return inv.print(msg.Data)
	}
	fmt.Fprintf(inv.stdout, "job %s/%s deleted\n", c, j)
	return nil
}

// jobState returns enable or disable: a patch of the state alone, which keeps the schedule.
func jobState(state job.State) func(inv *invocation, args []string) error {
	return func(inv *invocation, args []string) error {
		c, j, err := jobArgs(inv, args)
		if err != nil {
			return err
		}
		body, err := json.Marshal(map[string]any{"properties": map[string]any{"state": state}})
		if err != nil {
			return err
		}
		msg, err := inv.request(body, "jobs", "patch", c, j)
		if err != nil {
			return err
		}
		return inv.showJob(msg.Data)
	}
}

func jobRun(inv *invocation, args []string) error {
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	msg, err := inv.request(nil, "jobs", "run", c, j)
	if err != nil {
		return err
	}
	if inv.structured() {
		return inv.print(msg.Data)
	}
	fmt.Fprintf(inv.stdout, "job %s/%s: an occurrence is due now (see schedctl job history %s/%s)\n", c, j, c, j)
	return nil
}

func jobHistory(inv *invocation, args []string) error {
	st := inv.fs.String("status", "", "only attempts with this `status`")
	p := pagingFlags(inv.fs)
	watch := inv.fs.Bool("watch", false, "show the latest attempts (--top, 10), oldest first, then each one as it is recorded, until Ctrl-C")
	inv.fs.BoolVar(watch, "w", false, "short for --watch")
	interval := inv.fs.Duration("interval", watchInterval, "with --watch, how often to ask for the latest attempts (at least 100ms)")
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	if err := checkInterval(inv, *watch, *interval); err != nil {
		return err
	}
	if *watch {
		if p.all || p.skip > 0 || p.after != "" {
			return usagef("--watch follows the latest attempts: --all, --skip and --after do not go with it")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		w := &historyWatch{inv: inv, coll: c, job: j, status: *st, first: cmp.Or(p.top, watchTop), interval: *interval}
		return w.run(ctx)
	}
	raw, reply, err := inv.list(p, listRequest{Status: *st}, "jobs", "history", c, j)
	if err != nil {
		return err
	}
	none := "No history yet for job " + c + "/" + j + "."
	if *st != "" {
		none = "No attempt of job " + c + "/" + j + " with status " + *st + "."
	}
	return showList(inv, raw, reply, none, []string{"EXPECTED", "ACTION", "ATTEMPT", "STATUS", "STARTED", "MESSAGE"}, historyCells)
}

// historyMessageWidth is where a history table cuts messages; -o json has them whole.
const historyMessageWidth = 60

func historyCells(e job.HistoryEntry) []string {
	return []string{timeText(&e.ExpectedExecutionTime), string(e.ActionName), fmt.Sprint(e.RetryCount + 1),
		string(e.Status), timeText(&e.StartTime), orDash(truncate(e.Message, historyMessageWidth))}
}

// jobPublish publishes a definition (or a delete) on the intake subject: JetStream keeps it
// until a planner applies it, so it works while no planner runs. Refusals come as events.
func jobPublish(inv *invocation, args []string) error {
	file := inv.fs.String("f", "", "job definition `file`, or - for standard input")
	del := inv.fs.Bool("delete", false, "publish a delete of the job")
	wait := inv.fs.Duration("wait", 5*time.Second, "wait up to `duration` for a planner to apply it and say how it went (0: do not wait)")
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	subjects := bus.NewSubjects(inv.prefix)
	msg := nats.NewMsg(subjects.Job(c, j))
	what := "definition"
	switch {
	case *del == (*file != ""):
		return usagef("give -f FILE, or --delete")
	case *del:
		what = "delete"
		msg.Header.Set(bus.HeaderOperation, "delete")
	default:
		if msg.Data, err = inv.readFile(*file); err != nil {
			return err
		}
	}
	if err := inv.connect(); err != nil {
		return err
	}
	// Watched before publishing, so that the outcome cannot come before the subscription.
	var sub *nats.Subscription
	if *wait > 0 {
		if sub, err = inv.client.watch(subjects.Event(c, j, "*")); err != nil {
			fmt.Fprintf(inv.stderr, "schedctl: not waiting for the outcome (--wait 0 does not try): %v\n", err)
		} else {
			defer func() { _ = sub.Unsubscribe() }()
		}
	}
	seq, err := inv.client.publishDurable(msg)
	if err != nil {
		return err
	}
	rejected := subjects.Event(c, j, bus.EventRejected)
	if sub == nil {
		fmt.Fprintf(inv.stdout, "job %s/%s: %s published on %s; refusals come on %s\n", c, j, what, msg.Subject, rejected)
		return nil
	}
	e, err := outcome(sub, seq, *wait)
	if err != nil {
		return err
	}
	return publishOutcome(inv, c+"/"+j, what, e, *wait, rejected)
}

// publishOutcome says what became of a published definition or delete: applied (with the
// job's next run), refused (an error naming each bad field, as a put's), or not yet applied;
// with -o json or yaml, the planners' event.
func publishOutcome(inv *invocation, name, what string, e *bus.Event, wait time.Duration, rejected string) error {
	switch {
	case inv.structured() && (e == nil || e.Kind != bus.EventRejected):
		// The planners' event as it came ({} when none did in time), for scripts.
		data := []byte("{}")
		if e != nil {
			data = bus.AppendEvent(nil, *e)
		}
		return inv.print(data)
	case e == nil:
		fmt.Fprintf(inv.stdout, "job %s: %s published; no planner reported it within %v: it waits on the intake stream until one applies it, and a refusal comes on %s\n",
			name, what, wait, rejected)
	case e.Kind == bus.EventRejected:
		return &apiError{Status: 400, Code: "BadRequest", Message: fmt.Sprintf("job %s: the published %s was refused", name, what), Details: e.Errors}
	case e.Kind == bus.EventDeferred:
		fmt.Fprintf(inv.stdout, "job %s: %s published; the planners cannot store it now (%s): it waits on the intake stream and is applied once they can\n",
			name, what, e.Reason)
	case e.Kind == bus.EventSuperseded:
		fmt.Fprintf(inv.stdout, "job %s: %s published; it changed nothing: a later change to the job, published after it, was applied first, and the job is as that one says\n",
			name, what)
	case e.Kind == bus.EventDeleted && e.NotFound:
		fmt.Fprintf(inv.stdout, "job %s: not found; nothing was deleted\n", name)
	case e.Kind == bus.EventDeleted:
		fmt.Fprintf(inv.stdout, "job %s: deleted\n", name)
	case e.NextExecutionTime != nil:
		fmt.Fprintf(inv.stdout, "job %s: applied; next run %s\n", name, e.NextExecutionTime.UTC().Format(time.RFC3339))
	default:
		fmt.Fprintf(inv.stdout, "job %s: applied; no run is due (the job is disabled, or its series is over)\n", name)
	}
	return nil
}

// jobArgs parses the arguments of a subcommand that takes a job: COLLECTION/JOB, or
// COLLECTION JOB.
func jobArgs(inv *invocation, args []string) (string, string, error) {
	pos, err := inv.parse(args, 1, 2)
	if err != nil {
		return "", "", err
	}
	c, j := "", ""
	if len(pos) == 2 {
		c, j = pos[0], pos[1]
	} else if c, j, _ = strings.Cut(pos[0], "/"); j == "" {
		return "", "", usagef("%q: name the job as COLLECTION/JOB", pos[0])
	}
	if err := bus.CheckName("collection", c); err != nil {
		return "", "", &usageError{err.Error()}
	}
	if err := bus.CheckName("job", j); err != nil {
		return "", "", &usageError{err.Error()}
	}
	return c, j, nil
}

// writeJob prints a job as a key: value summary.
func writeJob(w io.Writer, d job.Definition, collectionPaused bool) {
	p, s := d.Properties, d.Properties.Status
	field(w, "Name", d.Name)
	field(w, "State", effectiveState(d, collectionPaused))
	if p.Action != nil {
		field(w, "Action", actionText(&p.Action.ActionSpec))
		if p.Action.ErrorAction != nil {
			field(w, "Error action", actionText(&p.Action.ErrorAction.ActionSpec))
		}
	}
	start := "at once (when accepted)"
	if p.StartTime != nil {
		start = p.StartTime.String()
	}
	field(w, "Start", start)
	field(w, "Schedule", recurrenceWords(p.Recurrence))
	field(w, "Next", nextText(d, collectionPaused))
	field(w, "Last", timeText(statusTime(s, false)))
	field(w, "Executions", countOf(s, func(s *job.Status) int { return s.ExecutionCount }))
	field(w, "Failures", countOf(s, func(s *job.Status) int { return s.FailureCount }))
	field(w, "Faulted", countOf(s, func(s *job.Status) int { return s.FaultedCount }))
}

// effectiveState is the state a job is in for a user: Enabled jobs of a paused collection
// are paused, whatever their own state says.
func effectiveState(d job.Definition, collectionPaused bool) string {
	if d.Properties.State == job.StateEnabled && collectionPaused {
		return "Paused (by its collection)"
	}
	return string(d.Properties.State)
}

// nextText is the next run, or why there is none.
func nextText(d job.Definition, collectionPaused bool) string {
	switch {
	case d.Properties.State == job.StateEnabled && collectionPaused:
		return "- (paused)"
	case d.Properties.State == job.StateDisabled:
		return "- (disabled)"
	}
	return timeText(statusTime(d.Properties.Status, true))
}

func statusTime(s *job.Status, next bool) *time.Time {
	switch {
	case s == nil:
		return nil
	case next:
		return s.NextExecutionTime
	}
	return s.LastExecutionTime
}

// countOf is a status counter, "unknown" when the planner sent no status (a planner of an
// earlier release sent none for a disabled job, as the original service did).
func countOf(s *job.Status, count func(*job.Status) int) string {
	if s == nil {
		return "unknown"
	}
	return fmt.Sprint(count(s))
}

// actionText names an action's type and target; the secrets never reach the client.
func actionText(a *job.ActionSpec) string {
	target := ""
	switch {
	case a.Request != nil:
		target = a.Request.Method + " " + a.Request.URI
	case a.QueueMessage != nil:
		target = a.QueueMessage.StorageAccount + "/" + a.QueueMessage.QueueName
	case a.ServiceBusQueueMessage != nil:
		target = a.ServiceBusQueueMessage.Namespace + "/" + a.ServiceBusQueueMessage.QueueName
	case a.ServiceBusTopicMessage != nil:
		target = a.ServiceBusTopicMessage.Namespace + "/" + a.ServiceBusTopicMessage.TopicPath
	}
	retry := "no retries"
	if n := a.RetryPolicy.Count(); n > 0 {
		retry = fmt.Sprintf("%d retries %s apart", n, shortDuration(a.RetryPolicy.Interval()))
		if n == 1 {
			retry = "1 retry " + shortDuration(a.RetryPolicy.Interval()) + " later"
		}
	}
	return strings.TrimSpace(string(a.Type)+" "+target) + " (" + retry + ")"
}

// shortDuration writes 1m rather than 1m0s, 2h rather than 2h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
