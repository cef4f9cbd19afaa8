package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/resched/resched/services/internal/bus"
)

// clusterGroup is `schedctl cluster`: the scheduler as a whole, for its operators.
var clusterGroup = &group{
	name: "cluster",
	summary: "Look at the scheduler as a whole through the planner's NATS API: an operator's view " +
		"(the tenants' permissions of docs/security.md do not allow it).",
	subs: []subcommand{
		{"status", "", "the live planners and the partitions each holds, the outages on record, the jobs due and " +
			"not published yet, the streams with their consumers' backlogs, and the settings of Redis or the streams " +
			"by which jobs or occurrences can be lost", clusterStatus},
	},
}

func clusterStatus(inv *invocation, args []string) error {
	if _, err := inv.parse(args, 0, 0); err != nil {
		return err
	}
	msg, err := inv.request(nil, "status")
	if err != nil {
		return err
	}
	return show(inv, msg.Data, writeStatus)
}

func writeStatus(w io.Writer, s bus.Status) {
	field(w, "Answered by", s.AnsweredBy+" ("+s.Version+") at "+s.Time.Format(time.RFC3339))
	field(w, "Planners", fmt.Sprintf("%d live", len(s.Planners)))
	for _, p := range s.Planners {
		field(w, "  "+p.ID, fmt.Sprintf("partitions %s; heartbeat until %s", orDash(spans(p.Partitions)), p.Until.Format(time.RFC3339)))
	}
	for i, p := range s.Leaving {
		key := ""
		if i == 0 {
			key = "Leaving"
		}
		field(w, key, fmt.Sprintf("%s, not live, holds partitions %s until its leases run out", p.ID, spans(p.Partitions)))
	}
	field(w, "Partitions", fmt.Sprintf("%d; held by no planner: %s", s.Partitions, orDash(spans(s.Unowned))))
	if s.Collections != nil {
		field(w, "Collections", strconv.Itoa(*s.Collections))
	}
	field(w, "Due, not published", strconv.FormatInt(s.DueNow, 10))
	for i, ch := range s.Changes {
		key := ""
		if i == 0 {
			key = "Collection changes"
		}
		field(w, key, changeLine(ch, s.Time))
	}
	if s.Purges != nil {
		field(w, "Job purges", purgeLine(*s.Purges, s.Time))
	}
	if len(s.Outages) == 0 {
		field(w, "Outages on record", "none")
	}
	for i, o := range s.Outages {
		key := ""
		if i == 0 {
			key = "Outages on record"
		}
		field(w, key, fmt.Sprintf("no planner ran from %s to %s (%v)", o.From.Format(time.RFC3339), o.To.Format(time.RFC3339), o.To.Sub(o.From).Round(time.Second)))
	}
	for _, st := range s.Streams {
		field(w, "Stream "+st.Name, plural(int(st.Messages), "message")+", "+plural(int(st.Bytes), "byte"))
		for _, c := range st.Consumers {
			field(w, "  consumer "+c.Name, fmt.Sprintf("%d pending, %d in flight, %d waiting pulls, %d redelivered",
				c.Pending, c.InFlight, c.Waiting, c.Redelivered))
		}
	}
	for _, p := range s.Problems {
		field(w, "Not read", p)
	}
	for _, warning := range s.Warnings {
		field(w, "Warning", warning)
	}
}

// spans writes partition numbers as ranges: 0-7, 9, 12-15.
func spans(ps []int) string {
	var parts []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ps[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// purgeLine says how many deleted or disabled jobs have messages still to be removed from the
// due stream, and how long ago the oldest was deleted or disabled: past bus.StalePurgeAfter its
// planner stopped (or NATS did not answer) and another planner removes them.
func purgeLine(p bus.PurgeStatus, now time.Time) string {
	ago := max(now.Sub(p.Oldest), 0).Round(time.Second)
	line := fmt.Sprintf("%s deleted or disabled with messages still to remove from the due stream, the oldest %v ago", plural(int(p.Jobs), "job"), ago)
	if ago >= bus.StalePurgeAfter {
		line += " (its planner stopped or NATS did not answer: another planner removes them)"
	}
	return line
}

// changeLine says what a collection's change under way sets and how long ago its last step
// was, by the answering planner's clock: one past bus.StaleChangeAfter was left by a planner
// that stopped, and waits for another to take it up.
func changeLine(ch bus.ChangeStatus, now time.Time) string {
	what := "being set " + ch.Change
	switch ch.Change {
	case "delete":
		what = "being deleted"
	case "": // left by a planner of an earlier release that deleted the collection: dropped soon
		what = "being changed"
	}
	ago := max(now.Sub(ch.LastStep), 0).Round(time.Second)
	line := fmt.Sprintf("%s %s, last step %v ago", ch.Collection, what, ago)
	if ago >= bus.StaleChangeAfter {
		line += " (its planner stopped: another planner finishes it)"
	}
	return line
}
