package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// jobGroup is `schedctl job`: jobs and their history on the planner's API.
var jobGroup = &group{
	name:    "job",
	summary: "Manage jobs through the planner's NATS API. A job is named COLLECTION/JOB (or COLLECTION JOB).",
	subs: []subcommand{
		{"put", "COLLECTION/JOB -f FILE|-", "create or replace a job from its definition", jobPut},
		{"get", "COLLECTION/JOB", "show a job and its status", jobGet},
		{"list", "COLLECTION [--state Enabled|Disabled|Completed|Faulted] [--top N] [--skip N] [--all]",
			"list the jobs of a collection", jobList},
		{"delete", "COLLECTION/JOB", "delete a job and its history", jobDelete},
		{"enable", "COLLECTION/JOB", "resume a disabled job", jobState(job.StateEnabled)},
		{"disable", "COLLECTION/JOB", "pause a job", jobState(job.StateDisabled)},
		{"run", "COLLECTION/JOB", "run one occurrence now, outside the schedule", jobRun},
		{"history", "COLLECTION/JOB [--status Completed|Failed|Postponed|Skipped] [--top N] [--skip N] [--all]",
			"list a job's attempts, newest first", jobHistory},
	},
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
	if !inv.asJSON() {
		fmt.Fprintf(inv.stdout, "job %s/%s %s\n", c, j, createdText(msg))
	}
	return show(inv, msg.Data, writeJob)
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
	return show(inv, msg.Data, writeJob)
}

func jobList(inv *invocation, args []string) error {
	state := inv.fs.String("state", "", "only jobs in this `state`")
	p := pagingFlags(inv.fs)
	c, err := collectionArg(inv, args)
	if err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	raw, reply, err := inv.list(p, listRequest{State: *state}, "jobs", "list", c)
	if err != nil {
		return err
	}
	return showList(inv, raw, reply, []string{"NAME", "STATE", "RECURRENCE", "NEXT", "LAST", "EXECUTIONS", "FAILURES"},
		func(d job.Definition) []string {
			s := status(d)
			return []string{d.Name, string(d.Properties.State), recurrenceText(d.Properties.Recurrence),
				timeText(s.NextExecutionTime), timeText(s.LastExecutionTime),
				fmt.Sprint(s.ExecutionCount), fmt.Sprint(s.FailureCount)}
		})
}

func jobDelete(inv *invocation, args []string) error {
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	msg, err := inv.request(nil, "jobs", "delete", c, j)
	if err != nil {
		return err
	}
	if inv.asJSON() {
		return printJSON(inv.stdout, msg.Data)
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
		return show(inv, msg.Data, writeJob)
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
	if inv.asJSON() {
		return printJSON(inv.stdout, msg.Data)
	}
	fmt.Fprintf(inv.stdout, "job %s/%s: an occurrence is due now (see schedctl job history %s/%s)\n", c, j, c, j)
	return nil
}

// historyMessageWidth is where a history table cuts messages; -o json has them whole.
const historyMessageWidth = 60

func jobHistory(inv *invocation, args []string) error {
	st := inv.fs.String("status", "", "only attempts with this `status`")
	p := pagingFlags(inv.fs)
	c, j, err := jobArgs(inv, args)
	if err != nil {
		return err
	}
	if err := p.check(); err != nil {
		return err
	}
	raw, reply, err := inv.list(p, listRequest{Status: *st}, "jobs", "history", c, j)
	if err != nil {
		return err
	}
	return showList(inv, raw, reply, []string{"EXPECTED", "ACTION", "ATTEMPT", "STATUS", "MESSAGE"},
		func(e job.HistoryEntry) []string {
			return []string{timeText(&e.ExpectedExecutionTime), string(e.ActionName), fmt.Sprint(e.RetryCount + 1),
				string(e.Status), orDash(truncate(e.Message, historyMessageWidth))}
		})
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
func writeJob(w io.Writer, d job.Definition) {
	p, s := d.Properties, status(d)
	field(w, "Name", d.Name)
	field(w, "State", string(p.State))
	if p.Action != nil {
		field(w, "Action", actionText(&p.Action.ActionSpec))
		if p.Action.ErrorAction != nil {
			field(w, "Error action", actionText(&p.Action.ErrorAction.ActionSpec))
		}
	}
	start := "-"
	if p.StartTime != nil {
		start = p.StartTime.String()
	}
	field(w, "Start", start)
	field(w, "Recurrence", recurrenceDetail(p.Recurrence))
	field(w, "Next", timeText(s.NextExecutionTime))
	field(w, "Last", timeText(s.LastExecutionTime))
	field(w, "Executions", fmt.Sprint(s.ExecutionCount))
	field(w, "Failures", fmt.Sprint(s.FailureCount))
	field(w, "Faulted", fmt.Sprint(s.FaultedCount))
}

func status(d job.Definition) job.Status {
	if d.Properties.Status == nil {
		return job.Status{}
	}
	return *d.Properties.Status
}

// recurrenceText is the short form of a recurrence: "Hour/1", or "once".
func recurrenceText(r *job.Recurrence) string {
	if r == nil {
		return "once"
	}
	return fmt.Sprintf("%s/%d", r.Frequency, r.IntervalOrDefault())
}

// recurrenceDetail is the long form: "every 1 Hour, 5 times, until …, time zone …, schedule {…}".
func recurrenceDetail(r *job.Recurrence) string {
	if r == nil {
		return "once"
	}
	parts := []string{fmt.Sprintf("every %d %s", r.IntervalOrDefault(), r.Frequency)}
	if r.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d times", r.Count))
	}
	if r.EndTime != nil {
		parts = append(parts, "until "+r.EndTime.String())
	}
	if r.TimeZone != "" {
		parts = append(parts, "time zone "+r.TimeZone)
	}
	if r.Schedule != nil {
		if b, err := json.Marshal(r.Schedule); err == nil {
			parts = append(parts, "schedule "+string(b))
		}
	}
	return strings.Join(parts, ", ")
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
		retry = fmt.Sprintf("%d retries %s apart", n, a.RetryPolicy.Interval())
	}
	return strings.TrimSpace(string(a.Type)+" "+target) + " (" + retry + ")"
}
