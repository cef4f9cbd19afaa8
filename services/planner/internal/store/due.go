package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/resched/resched/shared/job"
)

// Claim reads up to batch members of a partition that are due after dueAfter (zero: any) and by
// dueBy, earliest first, for the holder of the partition's lease (token); ErrNotOwner when that
// is not the caller. It also returns the earliest score after dueAfter in the partition's due
// set (zero when there is none), so the caller knows when to look again.
func (s *Store) Claim(ctx context.Context, partition int, token string, dueAfter, dueBy time.Time, batch int) ([]string, time.Time, error) {
	after := "-inf"
	if !dueAfter.IsZero() {
		after = strconv.FormatInt(dueAfter.UnixMilli(), 10)
	}
	res, err := s.run(ctx, "claim", []string{s.k.owner(partition), s.k.due(partition)}, token, dueBy.UnixMilli(), batch, after).StringSlice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim due jobs of partition %d: %w", partition, scriptError(err))
	}
	return res[:len(res)-1], parseScore(res[len(res)-1]), nil
}

// Advance is the move of one dispatched job to its next fire time.
type Advance struct {
	Collection, Name string
	Version          int64     // the job's version when it was read
	Claimed          time.Time // the job's Next when it was read
	Next             time.Time // zero: the series is over
	// DueAt is when the job is due again, when that is later than Next: a catch-up that fires
	// a burst of missed occurrences waits before the next burst. Zero: Next.
	DueAt      time.Time
	Fired      int
	Occurrence int
	Published  time.Time          // the last occurrence published now; zero when none was
	Park       job.State          // Faulted: the job is taken out of the schedule for good
	History    []job.HistoryEntry // entries to record with the move (skipped occurrences), oldest first
}

// Ended is a job that reached its final state.
type Ended struct {
	Collection, Name string
	State            job.State
}

// Advance moves dispatched jobs of one partition on, in one script, for the holder of the
// partition's lease (ErrNotOwner otherwise). Jobs changed since they were read are left alone.
// It returns the jobs that ended (Completed or Faulted) and the earliest score left in the due
// set (zero when it is empty).
func (s *Store) Advance(ctx context.Context, partition int, token string, moves []Advance) ([]Ended, time.Time, error) {
	keys := make([]string, 0, 2+3*len(moves))
	args := make([]any, 0, 2+10*len(moves))
	keys = append(keys, s.k.owner(partition), s.k.due(partition))
	args = append(args, token, s.historyMax)
	for _, a := range moves {
		var lines []string
		for _, h := range a.History { // the planner's own Skipped entries: their messages are one line
			lines = append(lines, historyLine(h, s.historyMessage))
		}
		due := a.Next
		if a.DueAt.After(due) && !due.IsZero() {
			due = a.DueAt
		}
		keys = append(keys, s.k.state(a.Collection, a.Name), s.k.coll(a.Collection), s.k.history(a.Collection, a.Name))
		args = append(args, member(a.Collection, a.Name), ms(a.Claimed), a.Version, ms(a.Next), ms(due), a.Fired, a.Occurrence,
			ms(a.Published), string(a.Park), strings.Join(lines, "\n"))
	}
	res, err := s.run(ctx, "advance", keys, args...).StringSlice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("advance %d jobs of partition %d: %w", len(moves), partition, scriptError(err))
	}
	var ended []Ended
	for i := 1; i+1 < len(res); i += 2 {
		c, j := splitMember(res[i])
		ended = append(ended, Ended{Collection: c, Name: j, State: job.State(res[i+1])})
	}
	return ended, parseScore(res[0]), nil
}

// DueBacklog counts the jobs due at now that have not been dispatched yet, over all partitions.
func (s *Store) DueBacklog(ctx context.Context, now time.Time) (int64, error) {
	pipe := s.rdb.Pipeline()
	max := fmt.Sprint(now.UnixMilli())
	for p := range s.Partitions() {
		pipe.ZCount(ctx, s.k.due(p), "-inf", max)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("count due jobs: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.(interface{ Val() int64 }).Val()
	}
	return n, nil
}

// parseScore reads a due-set score as the scripts return it ("" for none).
func parseScore(v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(f)).UTC()
}
