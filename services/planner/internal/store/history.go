package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
)

// History retention (docs/architecture.md): 60 days or the last 1,000 entries per job.
const (
	HistoryMaxEntries = 1000
	HistoryMaxAge     = 60 * 24 * time.Hour
)

// ResultMemory is how long the ids of applied results are remembered unless configured: a
// result delivered again within it (its planner died before acknowledging it) is ignored. It
// matches the JetStream duplicate window of the results stream.
const ResultMemory = 10 * time.Minute

// Outcome is one attempt reported by a worker, as the store records it.
type Outcome struct {
	ID         string // identifies the result; a result applied before (a redelivery) is ignored
	Entry      job.HistoryEntry
	Scheduled  time.Time // the occurrence's scheduled time
	Occurrence int       // the occurrence number; 0 for a run-now
	MainDone   bool      // this attempt ends the main action: the occurrence counts as executed
	Final      bool      // no further attempt follows for this occurrence
	Faulted    bool      // the main action failed through every retry
}

// ApplyResult records an attempt: history, status counters, and the end of the job when it
// was the final attempt of the last occurrence. It returns the job's new state in that case
// ("" otherwise, and when the job no longer exists).
func (s *Store) ApplyResult(ctx context.Context, c, j string, o Outcome, now time.Time) (job.State, error) {
	entry, err := historyLine(o.Entry)
	if err != nil {
		return "", err
	}
	keys := []string{s.k.state(c, j), s.k.history(c, j), s.k.results(c, j)}
	state, err := s.run(ctx, "apply_result", keys, entry, now.Add(-HistoryMaxAge).UnixMilli(), HistoryMaxEntries,
		string(o.Entry.ActionName), o.Entry.RetryCount, string(o.Entry.Status), o.Entry.StartTime.UnixMilli(),
		boolArg(o.Final), boolArg(o.Faulted), o.Scheduled.UnixMilli(), o.ID, now.UnixMilli(), s.resultMemory.Milliseconds(),
		o.Occurrence, boolArg(o.MainDone)).Text()
	if err != nil {
		return "", fmt.Errorf("apply result of %s/%s: %w", c, j, err)
	}
	return job.State(state), nil
}

// AppendHistory records entries that change no status (skipped occurrences), newest last.
func (s *Store) AppendHistory(ctx context.Context, c, j string, entries ...job.HistoryEntry) error {
	if len(entries) == 0 {
		return nil
	}
	lines := make([]any, len(entries))
	for i, e := range entries {
		line, err := historyLine(e)
		if err != nil {
			return err
		}
		lines[i] = line
	}
	pipe := s.rdb.TxPipeline()
	pipe.LPush(ctx, s.k.history(c, j), lines...)
	pipe.LTrim(ctx, s.k.history(c, j), 0, HistoryMaxEntries-1)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("append history of %s/%s: %w", c, j, err)
	}
	return nil
}

// History returns a job's history, newest first, without entries older than the retention.
func (s *Store) History(ctx context.Context, c, j string, now time.Time) ([]job.HistoryEntry, error) {
	lines, err := s.rdb.LRange(ctx, s.k.history(c, j), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read history of %s/%s: %w", c, j, err)
	}
	cutoff := now.Add(-HistoryMaxAge).UnixMilli()
	out := make([]job.HistoryEntry, 0, len(lines))
	for _, l := range lines {
		at, body, _ := strings.Cut(l, "|")
		if n, _ := strconv.ParseInt(at, 10, 64); n < cutoff {
			break // newest first: everything after is older still
		}
		var e job.HistoryEntry
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return nil, fmt.Errorf("read history of %s/%s: %w", c, j, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// historyLine prefixes the entry with its time so scripts can drop old entries without JSON.
func historyLine(e job.HistoryEntry) (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("encode history entry: %w", err)
	}
	at := e.StartTime
	if at.IsZero() {
		at = e.ExpectedExecutionTime
	}
	return strconv.FormatInt(at.UnixMilli(), 10) + "|" + string(b), nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
