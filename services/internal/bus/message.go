package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/resched/resched/shared/job"
)

// Due is a due occurrence, published by the planner on Subjects.Due for the workers.
// It carries the action with its secrets: the due stream belongs to the system and must be
// protected like Redis (NATS TLS and accounts in production).
type Due struct {
	Collection   string    `json:"collection"`
	Job          string    `json:"job"`
	Scheduled    time.Time `json:"scheduledTime"` // the expected execution time
	ExecutionTag string    `json:"executionTag"`  // same for every attempt of this occurrence
	Occurrence   int       `json:"occurrence"`    // the job's occurrence number, from 1 (history repeatCount)
	// Incarnation names the job the occurrence belongs to (store.Job.Incarnation): a job
	// deleted and created again under its name is another job, and the results of an attempt
	// of the deleted one, still running at the delete, must not count for the new one. 0 from a
	// planner of an earlier release, or for a job stored before incarnations were kept.
	Incarnation int64           `json:"incarnation,omitempty"`
	Action      json.RawMessage `json:"action"` // a job.Action, as JSON
}

// DueSize is at least the length of the JSON AppendDue writes: it grows its buffer once.
func DueSize(collection, job string, action json.RawMessage) int {
	return len(collection) + len(job) + len(action) + 224
}

// AppendDue appends the JSON of a Due to b without reflection: the planner writes one per
// fire. Names are safe to write unquoted-escaped (CheckName allows only A-Z a-z 0-9 - _) and
// action is JSON already, stored as the planner accepted it.
func AppendDue(b []byte, collection, job string, incarnation int64, scheduled time.Time, occurrence int, action json.RawMessage) []byte {
	return AppendDueTagged(b, collection, job, incarnation, scheduled, ExecutionTag(collection, job, incarnation, scheduled), occurrence, action)
}

// AppendDueTagged is AppendDue with the execution tag given (a run-now has its own).
func AppendDueTagged(b []byte, collection, job string, incarnation int64, scheduled time.Time, tag string, occurrence int, action json.RawMessage) []byte {
	b = slices.Grow(b, DueSize(collection, job, action))
	b = append(b, `{"collection":"`...)
	b = append(b, collection...)
	b = append(b, `","job":"`...)
	b = append(b, job...)
	b = append(b, `","scheduledTime":"`...)
	b = scheduled.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","executionTag":"`...)
	b = append(b, tag...)
	b = append(b, `","occurrence":`...)
	b = strconv.AppendInt(b, int64(occurrence), 10)
	if incarnation != 0 {
		b = append(b, `,"incarnation":`...)
		b = strconv.AppendInt(b, incarnation, 10)
	}
	b = append(b, `,"action":`...)
	if len(action) == 0 {
		action = json.RawMessage("null")
	}
	b = append(b, action...)
	return append(b, '}')
}

// DecodeDue reads a due occurrence as json.Unmarshal does. AppendDue's layout is read
// directly (encoding/json spent a tenth of a worker's CPU on it); any other JSON goes to
// json.Unmarshal. The action is checked to be JSON, not decoded.
func DecodeDue(data []byte) (Due, error) {
	if due, ok := decodeDueFast(data); ok {
		return due, nil
	}
	var due Due
	if err := json.Unmarshal(data, &due); err != nil {
		return Due{}, fmt.Errorf("not a due occurrence: %w", err)
	}
	return due, nil
}

func decodeDueFast(data []byte) (due Due, ok bool) {
	d := layoutReader{b: data, ok: true}
	due.Collection = d.field(`{"collection":`).str()
	due.Job = d.field(`,"job":`).str()
	due.Scheduled = d.field(`,"scheduledTime":`).time()
	due.ExecutionTag = d.field(`,"executionTag":`).str()
	due.Occurrence = d.field(`,"occurrence":`).int()
	if d.has(`,"incarnation":`) {
		due.Incarnation = int64(d.field(`,"incarnation":`).int())
	}
	d.field(`,"action":`)
	n := len(d.b) - 1
	if !d.ok || n < 1 || d.b[n] != '}' || jsonSpace(d.b[0]) || jsonSpace(d.b[n-1]) || !json.Valid(d.b[:n]) {
		return Due{}, false
	}
	due.Action = slices.Clone(json.RawMessage(d.b[:n]))
	return due, true
}

// jsonSpace reports white space around a JSON value, which json.Unmarshal leaves out of a
// json.RawMessage.
func jsonSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Result is one attempt reported by a worker on Subjects.Result.
type Result struct {
	Collection   string         `json:"collection"`
	Job          string         `json:"job"`
	Scheduled    time.Time      `json:"scheduledTime"`
	ExecutionTag string         `json:"executionTag"`
	Occurrence   int            `json:"occurrence"`
	Incarnation  int64          `json:"incarnation,omitempty"` // the Due's
	ActionName   job.ActionName `json:"actionName"`
	Attempt      int            `json:"attempt"` // 0 for the first attempt (history retryCount, with Delivery)
	// Delivery is the JetStream delivery count of the due message the attempt ran from, from
	// 1; 0 from a worker of an earlier release. A delivery count past the attempts numbered
	// before this one says that earlier deliveries left no result (a worker killed, stopped
	// or cut off mid-delivery): the planner records each of those as lost.
	Delivery  int                 `json:"delivery,omitempty"`
	StartTime time.Time           `json:"startTime"`
	EndTime   time.Time           `json:"endTime"`
	Status    job.ExecutionStatus `json:"status"`
	Message   string              `json:"message,omitempty"`
	// MainDone is set on the result that ends the occurrence's main action (a success, the
	// last failed attempt, or the hand-over to the error action): the planner counts the
	// occurrence as executed there, once.
	MainDone bool `json:"mainDone"`
	// Final is set on the last result of an occurrence: no further attempt follows.
	Final bool `json:"final"`
	// Faulted is set only on the Final result, when the main action failed through every
	// retry (whatever the error action did): the planner counts it into faultedCount once.
	Faulted bool `json:"faulted"`
}

// HistoryEntry is the history record of the attempt. Its retryCount counts the deliveries
// before it, which is the attempt's number unless a delivery past the retry policy ran the
// last attempt again: each call the target had then shows under a count of its own.
func (r Result) HistoryEntry() job.HistoryEntry {
	return job.HistoryEntry{
		StartTime: r.StartTime, EndTime: r.EndTime, ExpectedExecutionTime: r.Scheduled,
		ActionName: r.ActionName, Status: r.Status, Message: r.Message,
		RetryCount: max(r.Attempt, r.Delivery-1), RepeatCount: r.Occurrence,
	}
}

// ResultMsgID de-duplicates a result re-published after a worker restart, and names the
// delivery it reports: <tag>.<action>.<attempt>, and #<delivery> after it for a delivery past
// the retry policy, which runs the last attempt again (a delivery before it left no result,
// or had its acknowledgement lost), so that each delivery's result has an id of its own.
func ResultMsgID(r Result) string {
	id := r.ExecutionTag + "." + string(r.ActionName) + "." + strconv.Itoa(r.Attempt)
	if r.Delivery > r.Attempt+1 {
		id += "#" + strconv.Itoa(r.Delivery)
	}
	return id
}

// ResultsMsgID de-duplicates a message of several results published twice: it stands for
// their ids, in order.
func ResultsMsgID(rs []Result) string {
	h := sha256.New()
	for _, r := range rs {
		h.Write([]byte(ResultMsgID(r)))
		h.Write([]byte{'\n'})
	}
	return "results." + hex.EncodeToString(h.Sum(nil)[:16])
}

// Event kinds on Subjects.Event.
const (
	EventAccepted  = "accepted"
	EventRejected  = "rejected"
	EventCompleted = "completed"
	EventFaulted   = "faulted"
	EventDeleted   = "deleted"
	// EventDeferred: a definition or delete published on the intake that the planners could
	// not store now (Redis at its maxmemory, or its replicas not acknowledging); it waits on
	// the intake stream and is applied once they can, with an accepted or deleted event then.
	// Said once, at its first delivery.
	EventDeferred = "deferred"
	// EventSuperseded: a definition or delete published on the intake that changed nothing,
	// as a later one on the job's subject was applied before it (the planners apply the
	// stream in parallel); the job is as that later one says.
	EventSuperseded = "superseded"
)

// Event tells anyone listening what happened to a job.
type Event struct {
	Kind              string     `json:"kind"`
	Collection        string     `json:"collection"`
	Job               string     `json:"job"`
	Time              time.Time  `json:"time"`
	NextExecutionTime *time.Time `json:"nextExecutionTime,omitempty"`
	// IntakeSequence is the intake stream's sequence of the published definition or delete
	// the event reports (accepted, rejected, deleted), so that its publisher can tell its own
	// outcome from another's; absent for a change made through the API.
	IntakeSequence uint64 `json:"intakeSequence,omitempty"`
	// NotFound marks the deleted event of a delete published on the intake for a job that did
	// not exist: it is reported all the same, so that its publisher need not wait for an
	// event that never comes (a typo in the name reads as such at once).
	NotFound bool         `json:"notFound,omitempty"`
	Errors   []ErrorEntry `json:"errors,omitempty"` // rejected: one entry per bad field
	Reason   string       `json:"reason,omitempty"` // deferred: why the planners could not store it
}

// ErrorEntry is one problem of a rejected definition: the JSON path and a plain sentence.
type ErrorEntry struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// AppendEvent appends the JSON of an event to b, as json.Marshal writes it, without
// reflection for the events every put and fire publishes; one with errors (a rejection) or a
// reason (a deferral) goes through json.Marshal. Kinds and names need no escaping (CheckName).
func AppendEvent(b []byte, e Event) []byte {
	if len(e.Errors) > 0 || e.Reason != "" {
		out, err := json.Marshal(e)
		if err != nil {
			return b
		}
		return append(b, out...)
	}
	b = append(b, `{"kind":"`...)
	b = append(b, e.Kind...)
	b = append(b, `","collection":"`...)
	b = append(b, e.Collection...)
	b = append(b, `","job":"`...)
	b = append(b, e.Job...)
	b = append(b, `","time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if e.NextExecutionTime != nil {
		b = append(b, `,"nextExecutionTime":"`...)
		b = e.NextExecutionTime.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if e.IntakeSequence != 0 {
		b = append(b, `,"intakeSequence":`...)
		b = strconv.AppendUint(b, e.IntakeSequence, 10)
	}
	if e.NotFound {
		b = append(b, `,"notFound":true`...)
	}
	return append(b, '}')
}
