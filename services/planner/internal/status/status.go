// Package status assembles what `schedctl cluster status` shows: the live planners and the
// partitions each holds, the outages on record, the jobs due and not yet published, the
// collections' changes under way, and the scheduler's streams with their consumers, as the
// planner that answers sees them.
package status

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/version"
	"github.com/resched/resched/services/planner/internal/store"
)

// outagesShown is how many outages a status lists, the newest.
const outagesShown = 10

// changesShown bounds the collections' changes under way a status lists from each partition.
const changesShown = 10

// redisWait bounds how long a status waits for Redis: schedctl waits 5 s for the answer, and
// with Redis not answering the reads would take the client's read time-out and its retries, so
// schedctl saw no answer at all rather than the streams and what could not be read.
const redisWait = 2 * time.Second

// fromRedis is what a status reads of Redis.
type fromRedis struct {
	overview    store.Overview
	due         int64
	collections *int
	changes     []store.Change
	purges      *bus.PurgeStatus
	problems    []string
	warnings    []string
}

// Source reports the status. Its fields are set once.
type Source struct {
	Store    *store.Store
	JS       jetstream.JetStream
	Subjects bus.Subjects
	ID       string // this planner's
	Clock    func() time.Time
	// Settings are this planner's own warnings about its configuration (no secret keys, writes
	// that do not wait for a replica), as its start logs them: shown among the warnings, named
	// as the answering planner's, since another planner's configuration may differ.
	Settings []string
}

// Status reads everything it can; what it cannot read is named in Problems, so that an
// operator sees the rest when Redis or a stream is in trouble.
func (s *Source) Status(ctx context.Context) (bus.Status, error) {
	now := s.Clock()
	st := bus.Status{AnsweredBy: s.ID, Version: version.String(), Time: now.UTC(), Partitions: s.Store.Partitions(),
		Planners: []bus.PlannerStatus{}, Unowned: []int{}, Outages: []bus.OutageStatus{}, Streams: []bus.StreamStatus{}}
	r := s.redis(ctx, now)
	st.Problems = append(st.Problems, r.problems...)
	st.Warnings = append(st.Warnings, r.warnings...)
	for _, w := range s.Settings {
		st.Warnings = append(st.Warnings, "planner "+s.ID+": "+w)
	}
	held := map[string][]int{}
	for p, owner := range r.overview.Owners {
		if owner == "" {
			st.Unowned = append(st.Unowned, p)
			continue
		}
		held[owner] = append(held[owner], p)
	}
	for _, pl := range r.overview.Planners {
		st.Planners = append(st.Planners, bus.PlannerStatus{ID: pl.ID, Until: pl.Until, Partitions: append([]int{}, held[pl.ID]...)})
		delete(held, pl.ID)
	}
	for _, id := range slices.Sorted(maps.Keys(held)) {
		st.Leaving = append(st.Leaving, bus.LeaseHolder{ID: id, Partitions: held[id]})
	}
	for _, out := range r.overview.Outages {
		st.Outages = append(st.Outages, bus.OutageStatus{From: out.From, To: out.To, Recorded: out.Recorded})
	}
	st.DueNow, st.Collections = r.due, r.collections
	for _, ch := range r.changes {
		st.Changes = append(st.Changes, bus.ChangeStatus{Collection: ch.Collection, Change: ch.Kind, LastStep: ch.Last})
	}
	slices.SortStableFunc(st.Changes, func(a, b bus.ChangeStatus) int { return a.LastStep.Compare(b.LastStep) })
	st.Purges = r.purges
	for _, name := range []string{s.Subjects.IntakeStream(), s.Subjects.DueStream(), s.Subjects.ResultsStream()} {
		ss, risks, err := s.stream(ctx, name)
		for _, n := range risks {
			st.Warnings = append(st.Warnings, fmt.Sprintf("stream %s: %s is %s; the planners would set %s", n.Stream, n.Setting, n.Has, n.Wants))
		}
		if err != nil {
			st.Problems = append(st.Problems, err.Error())
			continue
		}
		st.Streams = append(st.Streams, ss)
	}
	return st, nil
}

// redis reads the planners' state and the due backlog, within redisWait.
func (s *Source) redis(ctx context.Context, now time.Time) fromRedis {
	ctx, cancel := context.WithTimeout(ctx, redisWait)
	defer cancel()
	var r fromRedis
	var err error
	if r.overview, err = s.Store.Overview(ctx, now, outagesShown); err != nil {
		r.problems = append(r.problems, err.Error())
	}
	if r.due, err = s.Store.DueBacklog(ctx, now); err != nil {
		r.problems = append(r.problems, err.Error())
	}
	if n, err := s.Store.CollectionCount(ctx); err != nil {
		r.problems = append(r.problems, err.Error())
	} else {
		r.collections = &n
	}
	if r.changes, err = s.Store.Changes(ctx, time.Time{}, changesShown); err != nil {
		r.problems = append(r.problems, err.Error())
	}
	if n, oldest, err := s.Store.PurgeBacklog(ctx); err != nil {
		r.problems = append(r.problems, err.Error())
	} else if n > 0 {
		r.purges = &bus.PurgeStatus{Jobs: n, Oldest: oldest}
	}
	// The settings the planners' start warns of (planner.lookAtRedis), read again: Redis may
	// have been set so since.
	if evicting, err := s.Store.Evicting(ctx); err != nil {
		r.problems = append(r.problems, "could not tell whether Redis may evict keys: "+err.Error())
	} else if len(evicting) > 0 {
		r.warnings = append(r.warnings, store.EvictingRisk+"; servers: "+strings.Join(evicting, ", "))
	}
	if unlogged, err := s.Store.Unlogged(ctx); err != nil {
		r.problems = append(r.problems, "could not tell whether Redis keeps an append-only file: "+err.Error())
	} else if len(unlogged) > 0 {
		r.warnings = append(r.warnings, store.UnloggedRisk+"; servers: "+strings.Join(unlogged, ", "))
	}
	return r
}

// stream reads one stream's state and its consumers', and notes its risky settings.
func (s *Source) stream(ctx context.Context, name string) (bus.StreamStatus, []bus.StreamNote, error) {
	str, err := s.JS.Stream(ctx, name)
	if err != nil {
		return bus.StreamStatus{}, nil, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		return bus.StreamStatus{}, nil, fmt.Errorf("stream %s: %w", name, err)
	}
	risks := bus.StreamRisks(info)
	ss := bus.StreamStatus{Name: name, Messages: info.State.Msgs, Bytes: info.State.Bytes, Consumers: []bus.ConsumerStatus{}}
	list := str.ListConsumers(ctx)
	for c := range list.Info() {
		ss.Consumers = append(ss.Consumers, bus.ConsumerStatus{Name: c.Name, Pending: c.NumPending, InFlight: c.NumAckPending,
			Waiting: c.NumWaiting, Redelivered: c.NumRedelivered})
	}
	if err := list.Err(); err != nil {
		return ss, risks, fmt.Errorf("consumers of %s: %w", name, err)
	}
	slices.SortFunc(ss.Consumers, func(a, b bus.ConsumerStatus) int { return strings.Compare(a.Name, b.Name) })
	return ss, risks, nil
}
