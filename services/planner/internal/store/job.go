package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
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
	// Incarnation is the version the job was created with: a job deleted and created again
	// under its name is another job, with another incarnation (versions never repeat). Its
	// occurrences carry it, and a result of another incarnation is not recorded. 0 for a job
	// created before incarnations were kept.
	Incarnation int64
	Counters
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
	// Stamp is the place in the intake stream of the message this write applies (zero when it
	// does not come from the intake): a message older than the job's last is stale.
	Stamp Stamp
	// CollectionGeneration, when set, fails the write with ErrCollectionChanged unless the
	// collection is still at this generation (Collection.Generation): the job was checked
	// against the collection as it was then.
	CollectionGeneration string
	// InPlace says the write changes a job's state and nothing else that grows (enabling or
	// disabling it, IfVersion set): it is stored alone with Redis's allow-oom flag, so that a
	// job can be disabled while Redis is at its maxmemory (UseScriptFlags). The caller vouches
	// that the definition is the stored one but for its state.
	InPlace bool
	// At is when the put is made (zero: the store's clock): a disable's record of the job's
	// messages to remove from the due stream is dated so (Applied.Purge).
	At time.Time
}

// Stamp is a message's place in the intake stream: the stream's creation (a stream made again
// starts its sequence over) and the message's sequence in it.
type Stamp struct {
	Epoch int64 // the stream's creation, ms
	Seq   uint64
}

func (s Stamp) args() (string, string) {
	if s.Seq == 0 {
		return "", ""
	}
	return fmt.Sprint(s.Epoch), fmt.Sprint(s.Seq)
}

// Applied is what became of one write of a batch.
type Applied struct {
	Created bool
	Version int64
	Due     bool // the job is in the due set now
	Stale   bool // an intake message older than the job's last, or that one again: nothing changed
	Again   bool // Stale, being the job's last intake message applied again (a redelivery)
	// Purge is a delete's record of the job's messages to remove from the due stream, when the
	// job existed (Created), or a disable's (Disabled): the caller ends it with EndPurge once
	// they are gone.
	Purge Purge
	// Disabled says a put disabled a job that was not disabled; Purge is then its record, as a
	// delete's (the caller removes what the due stream holds for the job and ends it).
	Disabled bool
	// Counters are a put's job's status counters as kept (a put leaves them as they were).
	Counters Counters
	Err      error
}

// Counters are the status counters of a job.
type Counters struct {
	Executions, Failures, Faults int
	LastExecution                time.Time // zero for none
}

// PutJob stores a job; the collection must exist and have room for a new job. It returns
// whether the job was created, its new version, and whether it is now in the due set.
func (s *Store) PutJob(ctx context.Context, p PutJob) (created bool, version int64, due bool, err error) {
	a := s.Apply(ctx, []Write{{Put: &p}})[0]
	return a.Created, a.Version, a.Due, a.Err
}

// Write is one write of a batch: a put or a delete.
type Write struct {
	Put    *PutJob
	Delete *DeleteJob
}

// DeleteJob is a delete of a job.
type DeleteJob struct {
	Collection, Name string
	Stamp            Stamp // see PutJob.Stamp
	// At is now (zero: the wall clock's): the delete's time, as its Purge and its intake
	// record (gone) keep it.
	At time.Time
}

// goneMemory is how long an intake delete is remembered against older puts of the same job
// arriving after it: far longer than a message can wait for redelivery.
const goneMemory = 24 * time.Hour

// Apply makes a batch of writes in one round trip to each Redis node, in the order given (so
// writes to one job apply in order); each has its own outcome. The puts of one partition go
// in one script call (putChunk at most); a delete has its own call, and the partition's puts
// after it go in a call after it.
func (s *Store) Apply(ctx context.Context, writes []Write) []Applied {
	out := make([]Applied, len(writes))
	dated(writes)
	calls := s.writeCalls(writes)
	cmds := s.evalMixed(ctx, len(calls), func(c int) (string, []string, []any) {
		w := writes[calls[c][0]]
		if w.Delete != nil {
			keys, args := s.deleteArgs(w.Delete)
			return "delete_job", keys, args
		}
		keys, args := s.putsArgs(writes, calls[c])
		if w.Put.InPlace && s.oomFlags {
			return putInPlace, keys, args
		}
		return "put_jobs", keys, args
	})
	for c, cmd := range cmds {
		if d := writes[calls[c][0]].Delete; d != nil {
			out[calls[c][0]] = deleteApplied(d, cmd)
			continue
		}
		res, err := cmd.Slice()
		if err == nil && len(res) != len(calls[c]) {
			err = fmt.Errorf("%d answers for %d puts", len(res), len(calls[c]))
		}
		for k, i := range calls[c] {
			p := writes[i].Put
			if err != nil {
				out[i] = Applied{Err: fmt.Errorf("put job %s/%s: %w", p.Collection, p.Name, scriptError(err))}
				continue
			}
			out[i] = putApplied(p, res[k])
		}
	}
	return out
}

// putChunk bounds the puts one script call stores, so that no call holds Redis for long (a
// put costs it about 30 µs).
const putChunk = 64

// writeCalls splits writes into script calls: a delete alone, an in-place put alone, or puts
// of one partition; a call alone closes its partition's call, so a put after it is stored
// after it.
func (s *Store) writeCalls(writes []Write) [][]int {
	return s.partitionCalls(len(writes), putChunk, func(i int) (string, bool) {
		if d := writes[i].Delete; d != nil {
			return d.Collection, true
		}
		return writes[i].Put.Collection, writes[i].Put.InPlace
	})
}

// putApplied reads one put's answer in a put_jobs reply.
func putApplied(p *PutJob, v any) Applied {
	fail := func(err error) Applied {
		return Applied{Err: fmt.Errorf("put job %s/%s: %w", p.Collection, p.Name, err)}
	}
	if msg, ok := v.(string); ok {
		if code, refused := strings.CutPrefix(msg, "!"); refused {
			return fail(scriptError(errors.New(code)))
		}
		return fail(fmt.Errorf("unexpected answer %q", msg))
	}
	vals, _ := v.([]any)
	if len(vals) < 8 {
		return fail(fmt.Errorf("%d values in the answer", len(vals)))
	}
	res := make([]int64, len(vals))
	for i, x := range vals {
		n, ok := x.(int64)
		if !ok {
			return fail(fmt.Errorf("value %d of the answer is %T", i, x))
		}
		res[i] = n
	}
	cnt := Counters{Executions: int(res[4]), Failures: int(res[5]), Faults: int(res[6])}
	if res[7] != 0 {
		cnt.LastExecution = time.UnixMilli(res[7]).UTC()
	}
	a := Applied{Created: res[0] == 1, Version: res[1], Due: res[2] == 1, Stale: res[3] != 0, Again: res[3] == 2, Counters: cnt}
	if len(res) > 9 && res[8] == 1 {
		a.Disabled = true
		a.Purge = Purge{Collection: p.Collection, Job: p.Name, Incarnation: res[9], Since: p.At, since: float64(p.At.UnixMilli())}
	}
	return a
}

func deleteApplied(d *DeleteJob, cmd *redis.Cmd) Applied {
	res, err := cmd.Int64Slice()
	if err == nil && (len(res) == 0 || res[0] == 1 && len(res) != 2) {
		err = fmt.Errorf("%d values answered", len(res))
	}
	if err != nil {
		return Applied{Err: fmt.Errorf("delete job %s/%s: %w", d.Collection, d.Name, err)}
	}
	n := res[0]
	a := Applied{Created: n == 1, Stale: n < 0, Again: n == -2} // Created: the job existed
	if a.Created {
		a.Purge = Purge{Collection: d.Collection, Job: d.Name, Incarnation: res[1], Since: d.At, since: float64(d.At.UnixMilli())}
	}
	return a
}

// putsArgs are put_jobs.lua's keys and arguments for the puts at idx, all of one partition.
func (s *Store) putsArgs(writes []Write, idx []int) ([]string, []any) {
	part := s.k.partitionOf(writes[idx[0]].Put.Collection)
	keys := make([]string, 0, 5+4*len(idx))
	args := make([]any, 0, 14*len(idx))
	keys = append(keys, s.k.due(part), s.k.seq(part), s.k.gone(part), s.k.goneTimes(part), s.k.purges(part))
	for _, i := range idx {
		p := writes[i].Put
		c, j := p.Collection, p.Name
		ifVersion, ifNext, reaccept := "", "", "0"
		if p.IfVersion != 0 {
			ifVersion = strconv.FormatInt(p.IfVersion, 10)
			if p.IfNext != nil {
				ifNext = "=" + ms(*p.IfNext)
			}
		}
		if p.Reaccept {
			reaccept = "1"
		}
		epoch, seq := p.Stamp.args()
		keys = append(keys, s.k.coll(c), s.k.jobs(c), s.k.def(c, j), s.k.state(c, j))
		args = append(args, member(c, j), j, p.Definition, ms(p.Accepted), ms(p.Next),
			string(p.State), ifVersion, reaccept, boolArg(p.CreateOnly), ifNext, epoch, seq, p.CollectionGeneration,
			p.At.UnixMilli())
	}
	return keys, args
}

func (s *Store) deleteArgs(d *DeleteJob) ([]string, []any) {
	c, j := d.Collection, d.Name
	part := s.k.partitionOf(c)
	epoch, seq := d.Stamp.args()
	keys := []string{s.k.jobs(c), s.k.def(c, j), s.k.state(c, j), s.k.history(c, j), s.k.due(part), s.k.results(c, j),
		s.k.gone(part), s.k.goneTimes(part), s.k.purges(part)}
	return keys, []any{member(c, j), j, epoch, seq, d.At.UnixMilli(), goneMemory.Milliseconds()}
}

// dated gives each write its time, to the millisecond Redis keeps: its At, or now for those
// without. A write is dated once, so that what a script records (a delete's purge, a disable's)
// and what Apply answers of it (Applied.Purge) agree.
func dated(writes []Write) {
	now := time.Now()
	for _, w := range writes {
		switch {
		case w.Put != nil:
			w.Put.At = cmp.Or(w.Put.At, now).Truncate(time.Millisecond)
		case w.Delete != nil:
			w.Delete.At = cmp.Or(w.Delete.At, now).Truncate(time.Millisecond)
		}
	}
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

// LoadJobs reads jobs by due-set member in one round trip; a missing job is nil. The reads
// are one transaction (per slot, on a cluster): a job's definition and state are of one
// version. Pipelined alone, another client's put could run between the two reads of a job
// (a long pipeline takes Redis several reads of the socket), and the dispatcher would cache
// one version's definition under another's number.
func (s *Store) LoadJobs(ctx context.Context, members []string) ([]*Job, error) {
	return s.loadJobs(ctx, members, nil)
}

// LoadClaimed reads jobs as LoadJobs does, except their status counters (left zero: the
// dispatcher has no use for them) and the definition (left nil) of each member for which
// held(i) is true: the dispatcher keeps definitions compiled by version, and read
// again at every fire a definition cost Redis and the planner more than the state beside it.
// Versions never repeat, so a caller holding the version read holds its definition; one whose
// version moved reads the job again with LoadJobs.
func (s *Store) LoadClaimed(ctx context.Context, members []string, held func(i int) bool) ([]*Job, error) {
	return s.loadJobs(ctx, members, held)
}

// loadByScript reads what loadJobs reads in a transaction in one script (load_jobs.lua), which
// Redis runs at its maxmemory. The members are of one partition, so the keys share a slot.
func (s *Store) loadByScript(ctx context.Context, members, fields []string, held func(i int) bool,
	defs []*redis.StringCmd, states []*redis.SliceCmd) error {
	keys := make([]string, 0, 2*len(members))
	args := make([]any, 0, 1+len(fields)+len(members))
	args = append(args, len(fields))
	for _, f := range fields {
		args = append(args, f)
	}
	for i, m := range members {
		c, j := splitMember(m)
		keys = append(keys, s.k.def(c, j), s.k.state(c, j))
		if held != nil && held(i) {
			args = append(args, "0")
		} else {
			args = append(args, "1")
		}
	}
	res, err := s.run(ctx, "load_jobs", keys, args...).Slice()
	if err != nil {
		return err
	}
	if len(res) != 2*len(members) {
		return fmt.Errorf("load_jobs answered %d values for %d jobs", len(res), len(members))
	}
	for i := range members {
		if held == nil || !held(i) {
			def, ok := res[2*i].(string)
			if ok {
				defs[i] = redis.NewStringResult(def, nil)
			} else {
				defs[i] = redis.NewStringResult("", redis.Nil)
			}
		}
		vals, _ := res[2*i+1].([]any)
		states[i] = redis.NewSliceResult(vals, nil)
	}
	return nil
}

// outOfMemoryInTx reports whether a transaction was refused as Redis at its maxmemory refuses
// one: every queued command refused, so the transaction discarded.
func outOfMemoryInTx(err error) bool {
	return OutOfMemory(err) || strings.HasPrefix(err.Error(), "EXECABORT")
}

func (s *Store) loadJobs(ctx context.Context, members []string, held func(i int) bool) ([]*Job, error) {
	fields := stateFields
	if held != nil {
		fields = stateFields[:scheduleFields]
	}
	defs := make([]*redis.StringCmd, len(members))
	states := make([]*redis.SliceCmd, len(members))
	read := func(pipe redis.Pipeliner) error {
		for i, m := range members {
			c, j := splitMember(m)
			if held == nil || !held(i) {
				defs[i] = pipe.Get(ctx, s.k.def(c, j))
			}
			states[i] = pipe.HMGet(ctx, s.k.state(c, j), fields...)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	// A job's definition and state are read in one transaction, so that they belong together.
	// Redis at its maxmemory refuses every command queued in a transaction, reads too, so
	// LoadJobs reads them again side by side: nothing can be written meanwhile but deletes
	// (read as a deleted job), and the jobs can still be listed and read to choose what to
	// delete. LoadClaimed (held set: the dispatcher), whose jobs are written meanwhile by the
	// advance, reads them in one script, which Redis runs at its maxmemory when it only reads,
	// but only where the advance runs too (UseScriptFlags): no occurrence may be published
	// that could not be advanced, since sent again once memory is freed, after the duplicate
	// window, it would fire twice.
	err := read(s.rdb.TxPipeline())
	if err != nil && outOfMemoryInTx(err) {
		switch {
		case held == nil:
			err = read(s.rdb.Pipeline())
		case s.oomFlags:
			err = s.loadByScript(ctx, members, fields, held, defs, states)
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	out := make([]*Job, len(members))
	for i, m := range members {
		var def []byte
		vals := states[i].Val()
		if defs[i] != nil {
			var err error
			if def, err = defs[i].Bytes(); errors.Is(err, redis.Nil) {
				continue
			}
		} else if len(vals) == 0 || vals[0] == nil {
			continue // no version: every put writes one, a delete removes the whole state
		}
		c, j := splitMember(m)
		out[i] = jobFromState(c, j, def, vals)
	}
	return out, nil
}

// stateFields are the fields of a job's state hash that a Job holds, in the order HMGET
// returns them (the scripts also keep lastOcc, finalOcc and finalFault there).
var stateFields = []string{"ver", "acc", "next", "fired", "occ", "state", "born", "exec", "fail", "faulted", "last"}

// scheduleFields is how many of stateFields come before the status counters.
const scheduleFields = 7

func jobFromState(c, j string, def []byte, vals []any) *Job {
	f := func(i int) string {
		if i >= len(vals) {
			return "" // not read
		}
		s, _ := vals[i].(string)
		return s
	}
	return &Job{
		Collection: c, Name: j, Definition: def,
		Version:     int64(atoi(f(0))),
		Accepted:    parseMS(f(1)),
		Next:        parseMS(f(2)),
		Fired:       atoi(f(3)),
		Occurrence:  atoi(f(4)),
		State:       job.State(f(5)),
		Incarnation: int64(atoi(f(6))),
		Counters:    Counters{Executions: atoi(f(7)), Failures: atoi(f(8)), Faults: atoi(f(9)), LastExecution: parseMS(f(10))},
	}
}

// DeleteJob deletes a job at the time at; it reports whether the job existed, and then the
// record of its purge from the due stream, for the caller to end (EndPurge) once done.
func (s *Store) DeleteJob(ctx context.Context, c, j string, at time.Time) (Purge, bool, error) {
	a := s.Apply(ctx, []Write{{Delete: &DeleteJob{Collection: c, Name: j, At: at}}})[0]
	return a.Purge, a.Created, a.Err
}

// JobNames lists the names of a collection's jobs, sorted.
func (s *Store) JobNames(ctx context.Context, c string) ([]string, error) {
	names, err := s.rdb.ZRange(ctx, s.k.jobs(c), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", c, err)
	}
	return names, nil
}

// JobNamesAt lists up to n names of a collection's jobs from position from (by name, 0 first).
func (s *Store) JobNamesAt(ctx context.Context, c string, from, n int) ([]string, error) {
	names, err := s.rdb.ZRange(ctx, s.k.jobs(c), int64(from), int64(from+n-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", c, err)
	}
	return names, nil
}

// JobNamesAfter lists up to n names of a collection's jobs that sort after the name after
// ("" for the first), in order: a page costs the same at any depth.
func (s *Store) JobNamesAfter(ctx context.Context, c, after string, n int) ([]string, error) {
	from := "-"
	if after != "" {
		from = "(" + after
	}
	names, err := s.rdb.ZRangeByLex(ctx, s.k.jobs(c), &redis.ZRangeBy{Min: from, Max: "+", Count: int64(n)}).Result()
	if err != nil {
		return nil, fmt.Errorf("list jobs of %s: %w", c, err)
	}
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
