package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
)

// History retention unless configured (WithHistory): 60 days or the last 1,000 entries per job,
// and a message (the target's answer) of at most 2,048 bytes.
const (
	HistoryMaxEntries = 1000
	HistoryMaxAge     = 60 * 24 * time.Hour
	HistoryMaxMessage = 2048
)

// ResultMemory is how long the ids of applied results are remembered unless configured: a
// result delivered again within it (its planner died before acknowledging it) is ignored. It
// matches the JetStream duplicate window of the results stream.
const ResultMemory = 10 * time.Minute

// WithHistory sets the history's retention: at most maxEntries per job, none older than maxAge,
// messages cut to maxMessage bytes.
func WithHistory(maxEntries int, maxAge time.Duration, maxMessage int) Option {
	return func(s *Store) {
		s.historyMax, s.historyAge, s.historyMessage = max(maxEntries, 1), max(maxAge, time.Hour), max(maxMessage, 0)
	}
}

// Outcome is one attempt reported by a worker, as the store records it.
type Outcome struct {
	ID         string // identifies the result; a result applied before (a redelivery) is ignored
	Entry      job.HistoryEntry
	Scheduled  time.Time // the occurrence's scheduled time
	Occurrence int       // the occurrence number; 0 for a run-now
	MainDone   bool      // this attempt ends the main action: the occurrence counts as executed
	Tag        string    // the occurrence's execution tag: it counts once, whichever attempts end it
	Final      bool      // no further attempt follows for this occurrence
	Faulted    bool      // the main action failed through every retry
	// Incarnation is that of the job the attempt ran for (Job.Incarnation, carried by the
	// occurrence): an attempt of a deleted job is not recorded for the job created after it.
	// 0 when unknown (a worker of an earlier release): recorded.
	Incarnation int64
	// Delivery is the due message's delivery count the attempt ran from (0: unknown), and
	// Lost the deliveries before it that may have left no result.
	Delivery int
	Lost     []Lost
}

// Lost is a delivery of an occurrence before the reported one that may have left no result:
// its worker was killed, stopped or cut off from NATS mid-delivery. It is recorded as a Failed
// entry of its own, its retryCount the deliveries before it, since its target may have
// received it, unless its result was recorded already; its result arriving later is then
// taken for a copy.
type Lost struct {
	Delivery int    // the due message's delivery count
	ID       string // the id its result would have had (Outcome.ID)
}

// LostMessage is the message of a lost delivery's history entry.
func LostMessage(delivery, next int) string {
	return fmt.Sprintf("Delivery %d of this occurrence left no result: the worker that had it was stopped or cut off before it "+
		"reported (its target may have received it; a result of it coming later is not recorded). Recorded as delivery %d began.", delivery, next)
}

// lostArg writes o.Lost for apply_results.lua: a line per delivery, its result id and its
// history entry separated by a tab. When a delivery began is not known: its entry is
// given the start of the one that followed it, which is when its loss became known.
func (s *Store) lostArg(o Outcome) string {
	var b strings.Builder
	for _, l := range o.Lost {
		b.WriteString(l.ID)
		b.WriteByte('\t')
		e := job.HistoryEntry{StartTime: o.Entry.StartTime, EndTime: o.Entry.StartTime, ExpectedExecutionTime: o.Scheduled,
			ActionName: o.Entry.ActionName, Status: job.ExecutionFailed, RetryCount: l.Delivery - 1, RepeatCount: o.Occurrence,
			Message: LostMessage(l.Delivery, o.Delivery)}
		b.WriteString(historyLine(e, s.historyMessage))
		b.WriteByte('\n')
	}
	return b.String()
}

// Result is an attempt of a job to record.
type Result struct {
	Collection, Job string
	Outcome         Outcome
}

// ResultApplied is what recording one attempt did: the job's new state when it was the final
// attempt of its last occurrence ("" otherwise, and when the job no longer exists).
type ResultApplied struct {
	State job.State
	Lost  int // deliveries before it recorded as lost (Outcome.Lost)
	Err   error
}

// ApplyResult records an attempt: history, status counters, and the end of the job when it
// was the final attempt of the last occurrence. It returns the job's new state in that case
// ("" otherwise, and when the job no longer exists).
func (s *Store) ApplyResult(ctx context.Context, c, j string, o Outcome, now time.Time) (job.State, error) {
	a := s.ApplyResults(ctx, []Result{{Collection: c, Job: j, Outcome: o}}, now)[0]
	return a.State, a.Err
}

// applyChunk bounds the results one script call records, so that no call holds Redis for
// long (a result costs it about 12 µs).
const applyChunk = 128

// ApplyResults records a batch of attempts in one round trip to each Redis node, in order: one
// script call per partition (and per applyChunk results), since a call may only name the keys
// of one Redis Cluster slot.
func (s *Store) ApplyResults(ctx context.Context, results []Result, now time.Time) []ResultApplied {
	calls := s.applyCalls(results)
	cmds := s.evalAll(ctx, "apply_results", len(calls), func(c int) ([]string, []any) {
		keys := make([]string, 0, 3*len(calls[c]))
		args := make([]any, 0, 4+12*len(calls[c]))
		args = append(args, now.Add(-s.historyAge).UnixMilli(), s.historyMax, now.UnixMilli(), s.resultMemory.Milliseconds())
		for _, i := range calls[c] {
			r := results[i]
			o := r.Outcome
			keys = append(keys, s.k.state(r.Collection, r.Job), s.k.history(r.Collection, r.Job), s.k.results(r.Collection, r.Job))
			args = append(args, historyLine(o.Entry, s.historyMessage), string(o.Entry.ActionName), string(o.Entry.Status),
				o.Entry.StartTime.UnixMilli(), boolArg(o.Final), faultArg(o), o.Scheduled.UnixMilli(), o.ID,
				o.Occurrence, doneArg(o), o.Incarnation, s.lostArg(o))
		}
		return keys, args
	})
	out := make([]ResultApplied, len(results))
	for c, cmd := range cmds {
		states, err := cmd.StringSlice()
		if err == nil && len(states) != len(calls[c]) {
			err = fmt.Errorf("%d states for %d results", len(states), len(calls[c]))
		}
		for k, i := range calls[c] {
			if err != nil {
				out[i].Err = fmt.Errorf("apply result of %s/%s: %w", results[i].Collection, results[i].Job, err)
				continue
			}
			if msg, failed := strings.CutPrefix(states[k], "!"); failed {
				out[i].Err = fmt.Errorf("apply result of %s/%s: %s", results[i].Collection, results[i].Job, msg)
				continue
			}
			out[i].Lost, out[i].State = lostAndState(states[k])
		}
	}
	return out
}

// lostAndState reads apply_results.lua's answer for a result that applied: the lost
// deliveries it recorded, before a colon when there were some, then the job's new state.
func lostAndState(s string) (int, job.State) {
	n, state, ok := strings.Cut(s, ":")
	if !ok {
		return 0, job.State(s)
	}
	lost, _ := strconv.Atoi(n)
	return lost, job.State(state)
}

// applyCalls splits results into script calls of one partition each.
func (s *Store) applyCalls(results []Result) [][]int {
	return s.partitionCalls(len(results), applyChunk, func(i int) (string, bool) {
		return results[i].Collection, false
	})
}

// AppendHistory records entries that change no status (skipped occurrences), newest last.
func (s *Store) AppendHistory(ctx context.Context, c, j string, entries ...job.HistoryEntry) error {
	if len(entries) == 0 {
		return nil
	}
	lines := make([]any, len(entries))
	for i, e := range entries {
		lines[i] = historyLine(e, s.historyMessage)
	}
	pipe := s.rdb.TxPipeline()
	pipe.LPush(ctx, s.k.history(c, j), lines...)
	pipe.LTrim(ctx, s.k.history(c, j), 0, int64(s.historyMax)-1)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("append history of %s/%s: %w", c, j, err)
	}
	return nil
}

// History returns a job's history, newest first (by start: results of one job applied side by
// side may have landed a little out of order), without entries older than the retention.
func (s *Store) History(ctx context.Context, c, j string, now time.Time) ([]job.HistoryEntry, error) {
	entries, _, _, err := s.HistoryRange(ctx, c, j, 0, s.historyMax, now)
	SortHistory(entries)
	return entries, err
}

// SortHistory orders entries newest first by their start, keeping the stored order of equals.
func SortHistory(entries []job.HistoryEntry) {
	slices.SortStableFunc(entries, func(a, b job.HistoryEntry) int { return b.StartTime.Compare(a.StartTime) })
}

// HistoryRange reads up to n entries of a job's history from position from (0 is the newest),
// in stored order, with each entry's mark (HistorySeek), and returns the position after the
// last one read, or -1 when the history ends there: a page costs the same at any depth.
func (s *Store) HistoryRange(ctx context.Context, c, j string, from, n int, now time.Time) ([]job.HistoryEntry, []string, int, error) {
	lines, err := s.rdb.LRange(ctx, s.k.history(c, j), int64(from), int64(from+n-1)).Result()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read history of %s/%s: %w", c, j, err)
	}
	cutoff := now.Add(-s.historyAge).UnixMilli()
	out := make([]job.HistoryEntry, 0, len(lines))
	marks := make([]string, 0, len(lines))
	next := from + len(lines)
	for _, l := range lines {
		e, at, err := parseHistoryLine(l)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read history of %s/%s: %w", c, j, err)
		}
		if at < cutoff {
			next = -1 // newest first: everything after is older still
			break
		}
		out = append(out, e)
		marks = append(marks, historyMark(l))
	}
	if len(lines) < n {
		next = -1
	}
	return out, marks, next, nil
}

// HistorySeek finds the entry with the mark at position from or deeper (the entries recorded
// since a page was read push it down the list) and returns the position after it, so that the
// next page of a listing starts there whatever was recorded meanwhile; -1 when it is gone
// (trimmed, and everything older with it). The list holds at most the history's length.
func (s *Store) HistorySeek(ctx context.Context, c, j string, from int, mark string) (int, error) {
	const chunk = 100
	for pos := max(from, 0); pos < s.historyMax+chunk; pos += chunk {
		lines, err := s.rdb.LRange(ctx, s.k.history(c, j), int64(pos), int64(pos+chunk-1)).Result()
		if err != nil {
			return 0, fmt.Errorf("read history of %s/%s: %w", c, j, err)
		}
		for i, l := range lines {
			if historyMark(l) == mark {
				return pos + i + 1, nil
			}
		}
		if len(lines) < chunk {
			break
		}
	}
	return -1, nil
}

// historyMark names a stored history line for a cursor: a hash of the line, short in a URL.
func historyMark(line string) string {
	h := fnv.New64a()
	h.Write([]byte(line))
	return strconv.FormatUint(h.Sum64(), 36)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// faultArg says whether a result ends its occurrence faulted, and which occurrence, so that it
// counts once.
func faultArg(o Outcome) string {
	switch {
	case !o.Faulted:
		return "0"
	case o.Tag == "":
		return "1"
	}
	return "fault:" + o.Tag
}

// doneArg says whether a result ends its occurrence's main action, and which occurrence.
func doneArg(o Outcome) string {
	if !o.MainDone {
		return ""
	}
	return "done:" + o.Tag
}
