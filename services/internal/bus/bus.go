// Package bus is the NATS contract of the system as code: subject names, stream and consumer
// names, header keys, the message id of a due occurrence, and the messages that flow between
// the planner and the workers (docs/nats-api.md). Subjects are a public
// contract; change them only with a migration note.
package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultPrefix is the first token of every subject unless configured otherwise.
const DefaultPrefix = "scheduler"

// Header keys.
const (
	// HeaderOperation on an intake message: "delete" deletes the job; absent or "put" stores it.
	HeaderOperation = "Scheduler-Operation"
	// HeaderMsgID is JetStream's de-duplication header.
	HeaderMsgID = "Nats-Msg-Id"
)

// CheckName returns an error naming the rule when name cannot be a collection or job name:
// 1 to 64 of A-Z a-z 0-9 - _ (docs/nats-api.md). Names are subject tokens, so they must not
// hold dots, wildcards or spaces. Checked byte by byte rather than with a regular expression:
// every put and every result checks two names, and the expression cost a few per cent of a
// planner applying results.
func CheckName(kind, name string) error {
	if !validName(name) {
		return fmt.Errorf("%s name %q: must be 1 to 64 of A-Z a-z 0-9 - _", kind, name)
	}
	return nil
}

func validName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// AfterForPrefix is the list cursor ("after") from which a listing of jobs, which the planners
// keep in name order, reaches first the names that start with prefix ("" for none): the largest
// name below all of them. Names are letters, digits, '-' and '_', all below '~'.
func AfterForPrefix(prefix string) string {
	if prefix == "" {
		return ""
	}
	b := []byte(prefix)
	b[len(b)-1]--
	return string(b) + "~"
}

// Subjects builds subject names under one prefix.
type Subjects struct{ Prefix string }

// NewSubjects returns the subjects under prefix, or the default prefix when it is empty.
func NewSubjects(prefix string) Subjects {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Subjects{Prefix: prefix}
}

// Job is the intake subject of a job definition.
func (s Subjects) Job(collection, job string) string {
	return s.Prefix + ".jobs." + collection + "." + job
}

// Due is the subject a due occurrence is published on.
func (s Subjects) Due(collection, job string) string {
	return s.Prefix + ".due." + collection + "." + job
}

// DueOf is the subjects of every due occurrence of a collection.
func (s Subjects) DueOf(collection string) string {
	return s.Prefix + ".due." + collection + ".>"
}

// DueCollection is the collection of a due subject, "" when subject is not one.
func (s Subjects) DueCollection(subject string) string {
	rest, ok := strings.CutPrefix(subject, s.Prefix+".due.")
	if !ok {
		return ""
	}
	c, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return c
}

// Result is the subject a worker reports an attempt on.
func (s Subjects) Result(collection, job string) string {
	return s.Prefix + ".results." + collection + "." + job
}

// Results is the subject a worker reports several attempts of one collection's jobs on, in
// one message (a JSON array): a busy worker sends what finished while it sent the last one.
func (s Subjects) Results(collection string) string {
	return s.Prefix + ".results." + collection
}

// Event is the subject of a job event (accepted, rejected, completed, faulted).
func (s Subjects) Event(collection, job, kind string) string {
	return s.Prefix + ".events." + collection + "." + job + "." + kind
}

// Wake is the subject on which the planners tell each other that a job of partition p (a
// number, or "*" to subscribe) became due soon: the planner that dispatches it looks at once.
// It is internal to the planners (core NATS, no payload).
func (s Subjects) Wake(p string) string {
	return s.Prefix + ".planner.wake." + p
}

// API is the subject of a request/reply operation, e.g. API("jobs", "put", c, j).
func (s Subjects) API(tokens ...string) string {
	out := s.Prefix + ".api"
	for _, t := range tokens {
		out += "." + t
	}
	return out
}

// Stream names. JetStream stream names may not contain dots, so they derive from the prefix
// with underscores, upper-cased by convention.
func (s Subjects) IntakeStream() string  { return streamName(s.Prefix, "JOBS") }
func (s Subjects) DueStream() string     { return streamName(s.Prefix, "DUE") }
func (s Subjects) ResultsStream() string { return streamName(s.Prefix, "RESULTS") }

func streamName(prefix, kind string) string {
	b := []byte(prefix)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '.' || c == '*' || c == '>' || c == ' ':
			b[i] = '_'
		}
	}
	return string(b) + "_" + kind
}

// Durable consumer names, one per role: every replica of a role shares its consumer.
const (
	IntakeConsumer  = "planner-intake"
	ResultsConsumer = "planner-results"
	WorkerConsumer  = "workers"
)

// MsgID identifies a due occurrence for JetStream's duplicate window: the job, its
// incarnation and its scheduled time, so a re-publish after a crash is dropped, and an
// occurrence of a job deleted and created again under its name is not taken for one of the
// deleted job. A job of an earlier release without an incarnation (0) keeps the id it had.
func MsgID(collection, job string, incarnation int64, scheduled time.Time) string {
	id := collection + "." + job + "." + strconv.FormatInt(scheduled.UnixMilli(), 10)
	if incarnation != 0 {
		id += "." + strconv.FormatInt(incarnation, 10)
	}
	return id
}

// RunNowID identifies a run-now occurrence: its own id, so that it never collides with the
// scheduled occurrence of the same millisecond, nor with another run-now (nonce).
func RunNowID(collection, job string, incarnation int64, at time.Time, nonce string) string {
	return MsgID(collection, job, incarnation, at) + ".run." + nonce
}

// ExecutionTag is the identity of one occurrence that targets see (x-ms-scheduler-execution-tag):
// 32 lower-case hex characters as the original service sent, the same on every retry and on a
// re-publish, because it derives from the occurrence's message id (MsgID): the job, its
// incarnation and the scheduled time.
func ExecutionTag(collection, job string, incarnation int64, scheduled time.Time) string {
	return TagOf(MsgID(collection, job, incarnation, scheduled))
}

// TagOf is the execution tag of an occurrence with message id id.
func TagOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}
