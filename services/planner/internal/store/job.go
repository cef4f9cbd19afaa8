package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/shared/job"
)

// Job is the stored record of a job: its definition blob and the planner's state beside it.
type Job struct {
	Collection, Name string
	Definition       []byte // the properties JSON (startTime, action, recurrence), secrets included
	Version          int64
	Accepted         time.Time // the "now" of docs/recurrence.md: when the schedule was (re)accepted
	Next             time.Time // the next fire time; zero when there is none
	Fired            int       // executions made since acceptance, for recurrence.count
	Occurrence       int       // occurrences published over the job's life (history repeatCount)
	State            job.State
	Executions       int
	Failures         int
	Faults           int
	LastExecution    time.Time
}

// PutJob is a write of a job definition.
type PutJob struct {
	Collection, Name string
	Definition       []byte
	Accepted         time.Time
	Next             time.Time // zero: nothing to fire
	State            job.State
	Reaccept         bool  // set Accepted and restart the count (a PUT, or a PATCH of the schedule)
	IfVersion        int64 // non-zero: fail with ErrConflict unless the stored version is this
	// IfNext, with IfVersion, also fails the write unless the stored next fire time is this one
	// (zero: none). A change that keeps the schedule needs it: the dispatcher moves a job on
	// without a new version, and writing back the next time read would fire it again.
	IfNext     *time.Time
	CreateOnly bool // fail with ErrExists when the job exists
}

// PutJob stores a job; the collection must exist and have room for a new job. It returns
// whether the job was created, its new version, and whether it is now in the due set.
func (s *Store) PutJob(ctx context.Context, p PutJob) (created bool, version int64, due bool, err error) {
	c, j := p.Collection, p.Name
	ifVersion, ifNext, reaccept := "", "", "0"
	if p.IfVersion != 0 {
		ifVersion = fmt.Sprint(p.IfVersion)
		if p.IfNext != nil {
			ifNext = "=" + ms(*p.IfNext)
		}
	}
	if p.Reaccept {
		reaccept = "1"
	}
	part := s.k.partitionOf(c)
	keys := []string{s.k.coll(c), s.k.jobs(c), s.k.def(c, j), s.k.state(c, j), s.k.due(part), s.k.seq(part)}
	res, err := s.run(ctx, "put_job", keys, member(c, j), j, p.Definition, ms(p.Accepted), ms(p.Next),
		string(p.State), ifVersion, reaccept, boolArg(p.CreateOnly), ifNext).Int64Slice()
	if err != nil {
		return false, 0, false, fmt.Errorf("put job %s/%s: %w", c, j, scriptError(err))
	}
	return res[0] == 1, res[1], res[2] == 1, nil
}

// GetJob reads a job, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, c, j string) (*Job, error) {
	jobs, err := s.LoadJobs(ctx, []string{member(c, j)})
	if err != nil {
		return nil, err
	}
	if jobs[0] == nil {
		return nil, fmt.Errorf("job %s/%s: %w", c, j, ErrNotFound)
	}
	return jobs[0], nil
}

// LoadJobs reads jobs by due-set member in one round trip; a missing job is nil.
func (s *Store) LoadJobs(ctx context.Context, members []string) ([]*Job, error) {
	pipe := s.rdb.Pipeline()
	defs := make([]*redis.StringCmd, len(members))
	states := make([]*redis.SliceCmd, len(members))
	for i, m := range members {
		c, j := splitMember(m)
		defs[i] = pipe.Get(ctx, s.k.def(c, j))
		states[i] = pipe.HMGet(ctx, s.k.state(c, j), stateFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	out := make([]*Job, len(members))
	for i, m := range members {
		def, err := defs[i].Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		c, j := splitMember(m)
		out[i] = jobFromState(c, j, def, states[i].Val())
	}
	return out, nil
}

// stateFields are the fields of a job's state hash that a Job holds, in the order HMGET
// returns them (the scripts also keep lastOcc, finalOcc and finalFault there).
var stateFields = []string{"ver", "acc", "next", "fired", "occ", "state", "exec", "fail", "faulted", "last"}

func jobFromState(c, j string, def []byte, vals []any) *Job {
	f := func(i int) string {
		s, _ := vals[i].(string)
		return s
	}
	return &Job{
		Collection: c, Name: j, Definition: def,
		Version:       int64(atoi(f(0))),
		Accepted:      parseMS(f(1)),
		Next:          parseMS(f(2)),
		Fired:         atoi(f(3)),
		Occurrence:    atoi(f(4)),
		State:         job.State(f(5)),
		Executions:    atoi(f(6)),
		Failures:      atoi(f(7)),
		Faults:        atoi(f(8)),
		LastExecution: parseMS(f(9)),
	}
}

// DeleteJob deletes a job; it reports whether the job existed.
func (s *Store) DeleteJob(ctx context.Context, c, j string) (bool, error) {
	keys := []string{s.k.jobs(c), s.k.def(c, j), s.k.state(c, j), s.k.history(c, j), s.k.due(s.k.partitionOf(c)), s.k.results(c, j)}
	n, err := s.run(ctx, "delete_job", keys, member(c, j), j).Int()
	if err != nil {
		return false, fmt.Errorf("delete job %s/%s: %w", c, j, err)
	}
	return n == 1, nil
}

// JobNames lists the names of a collection's jobs, sorted.
func (s *Store) JobNames(ctx context.Context, c string) ([]string, error) {
	names, err := s.rdb.SMembers(ctx, s.k.jobs(c)).Result()
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", c, err)
	}
	slices.Sort(names)
	return names, nil
}

// Member returns the due-set member of a job, as Claim returns it.
func Member(c, j string) string { return member(c, j) }

func splitMember(m string) (c, j string) {
	c, j, _ = strings.Cut(m, "/")
	return c, j
}

// SplitMember returns the collection and job of a due-set member.
func SplitMember(m string) (c, j string) { return splitMember(m) }
