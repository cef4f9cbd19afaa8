package main

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/jobs"
)

// natsWaker tells the planners, over NATS, that a partition has a job due soon (no payload),
// or that jobs of it changed (one "c/j" or "c/" a line; a planner of an earlier release takes
// it for a wake-up). It publishes on the connection that answers the change afterwards, so the
// server has passed the notice on by the time the client has its answer (one server; a
// cluster's routes may take a little longer).
//
// A wake-up for a partition this planner holds goes to its own dispatcher without NATS (local,
// held): a put of a job due soon, one a request at a spread rate, cost a message through the
// server and back. Should the lease move meanwhile, the planner that takes it looks at the
// partition's due set as it starts, as after any takeover. A change for a held partition
// reaches its own dispatcher at once too, before the change is answered, so that an occurrence
// read ahead cannot go out after the answer while NATS passes the notice on (or loses it in a
// reconnect); it still goes over NATS as well, since a planner that held the lease a moment ago
// may hold such an occurrence.
type natsWaker struct {
	nc       *nats.Conn
	subjects bus.Subjects
	local    jobs.Waker     // this planner's dispatcher; nil: every wake-up over NATS
	held     func(int) bool // whether this planner holds a partition's lease
}

func (w natsWaker) Wake(partition int) {
	if w.local != nil && w.held(partition) {
		w.local.Wake(partition)
		return
	}
	_ = w.nc.Publish(w.subjects.Wake(strconv.Itoa(partition)), nil)
}

// changedPayload bounds a message of Changed, well within any server's max_payload.
const changedPayload = 32 << 10

func (w natsWaker) Changed(partition int, jobs []string) {
	if w.local != nil && w.held(partition) {
		w.local.Changed(partition, jobs)
	}
	subject := w.subjects.Wake(strconv.Itoa(partition))
	var b []byte
	for i, j := range jobs {
		b = append(b, j...)
		if i == len(jobs)-1 || len(b)+1+len(jobs[i+1]) > changedPayload {
			_ = w.nc.Publish(subject, b)
			b = b[:0:0]
			continue
		}
		b = append(b, '\n')
	}
}

// onWake hands what a natsWaker published to the dispatcher of this planner, which takes it as
// the jobs service's Waker would.
func onWake(d jobs.Waker) nats.MsgHandler {
	return func(m *nats.Msg) {
		part, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		switch {
		case err != nil:
		case len(m.Data) == 0:
			d.Wake(part)
		default:
			d.Changed(part, strings.Split(string(m.Data), "\n"))
		}
	}
}
