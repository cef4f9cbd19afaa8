package store_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// BenchmarkFireRound is the store's share of firing a batch of 256 jobs: the claim, the load
// and the advance, against a real redis-server. Every job stays due, so each round claims the
// same kind of batch again. It reports Redis's CPU per job beside the client's ns/op.
func BenchmarkFireRound(b *testing.B) {
	// A job's first fire reads its definition (LoadJobs); a recurring job's later fires, whose
	// definition the dispatcher holds compiled, read its state alone (LoadClaimed).
	load := map[string]func(*store.Store, []string) ([]*store.Job, error){
		"definitions": func(s *store.Store, members []string) ([]*store.Job, error) {
			return s.LoadJobs(context.Background(), members)
		},
		"held": func(s *store.Store, members []string) ([]*store.Job, error) {
			return s.LoadClaimed(context.Background(), members, func(int) bool { return true })
		},
	}
	for _, name := range []string{"definitions", "held"} {
		b.Run(name, func(b *testing.B) { fireRounds(b, load[name]) })
	}
}

func fireRounds(b *testing.B, load func(*store.Store, []string) ([]*store.Job, error)) {
	const jobs, batch = 20_000, 256
	ctx := context.Background()
	s, rdb := benchStore(b, jobs)
	p := s.PartitionOf("c")
	if _, err := s.Acquire(ctx, []int{p}, "bench", time.Hour); err != nil {
		b.Fatal(err)
	}
	now := t0.Add(time.Second)
	moves := make([]store.Advance, 0, batch)
	cpu := redistest.CPU(b, rdb)
	b.ResetTimer()
	for b.Loop() {
		members, _, err := s.Claim(ctx, p, "bench", time.Time{}, now, batch)
		if err != nil || len(members) != batch {
			b.Fatalf("claimed %d: %v", len(members), err)
		}
		recs, err := load(s, members)
		if err != nil {
			b.Fatal(err)
		}
		moves = moves[:0]
		for _, r := range recs {
			// Next stays t0 so that the job is due again for the next round.
			moves = append(moves, store.Advance{Collection: r.Collection, Name: r.Name, Version: r.Version, Claimed: r.Next, Next: r.Next,
				Fired: r.Fired + 1, Occurrence: r.Occurrence + 1, Published: r.Next})
		}
		if _, _, err := s.Advance(ctx, p, "bench", moves); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/job")
	b.ReportMetric(float64(redistest.CPU(b, rdb)-cpu)/float64(b.N*batch)/1e3, "redis-cpu-µs/job")
}

// BenchmarkFireRoundOnce is BenchmarkFireRound for one-time jobs, a burst's case: each job
// is read whole and fired once, its series over in the advance. The jobs of a round are put before it,
// outside the measurement; Redis's CPU is read around the claim, load and advance alone.
func BenchmarkFireRoundOnce(b *testing.B) {
	const batch = 256
	ctx := context.Background()
	s, rdb := benchStore(b, 0)
	p := s.PartitionOf("c")
	if _, err := s.Acquire(ctx, []int{p}, "bench", time.Hour); err != nil {
		b.Fatal(err)
	}
	def := []byte(`{"startTime":"2026-01-01T12:00:00Z"}` + "\n" + `{"type":"Http"}`)
	now, seq := t0.Add(time.Second), 0
	moves := make([]store.Advance, 0, batch)
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		for range batch {
			seq++
			if _, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "c", Name: fmt.Sprint("once", seq), Definition: def,
				Accepted: t0, Next: t0, State: job.StateEnabled}); err != nil {
				b.Fatal(err)
			}
		}
		before := redistest.CPU(b, rdb)
		b.StartTimer()
		members, _, err := s.Claim(ctx, p, "bench", time.Time{}, now, batch)
		if err != nil || len(members) != batch {
			b.Fatalf("claimed %d: %v", len(members), err)
		}
		recs, err := s.LoadJobs(ctx, members)
		if err != nil {
			b.Fatal(err)
		}
		moves = moves[:0]
		for _, r := range recs {
			moves = append(moves, store.Advance{Collection: r.Collection, Name: r.Name, Version: r.Version, Claimed: r.Next,
				Fired: r.Fired + 1, Occurrence: r.Occurrence + 1, Published: r.Next})
		}
		// Each occurrence was published: its result, not the advance, ends the job.
		if _, _, err := s.Advance(ctx, p, "bench", moves); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += redistest.CPU(b, rdb) - before
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/job")
	b.ReportMetric(float64(cpu)/float64(b.N*batch)/1e3, "redis-cpu-µs/job")
}

// BenchmarkApplyResults is the planner's results consumer's share of a fire: a batch of 256
// attempts (a success each, with the short message a target's 200 leaves) recorded in one
// pipelined round trip: history line, counters, result id remembered. It reports Redis's CPU
// per result and, once the jobs' histories hold 50 entries each, the bytes one history entry
// takes in Redis (MEMORY USAGE of the history lists over their entries).
func BenchmarkApplyResults(b *testing.B) {
	const jobs, batch, message = 2_000, 256, "Http Status: 200 OK"
	ctx := context.Background()
	s, rdb := benchStore(b, jobs)
	seq := 0
	results := make([]store.Result, batch)
	apply := func() {
		for i := range results {
			seq++
			at := t0.Add(time.Duration(seq) * time.Second)
			results[i] = store.Result{Collection: "c", Job: fmt.Sprint("j", seq%jobs), Outcome: store.Outcome{
				ID: fmt.Sprintf("r%d", seq), Scheduled: at, Occurrence: seq/jobs + 1, MainDone: true, Tag: fmt.Sprintf("t%d", seq), Final: true,
				Entry: job.HistoryEntry{StartTime: at, EndTime: at.Add(40 * time.Millisecond), ExpectedExecutionTime: at,
					ActionName: job.ActionNameMain, Status: job.ExecutionCompleted, Message: message, RepeatCount: seq/jobs + 1}}}
		}
		for _, a := range s.ApplyResults(ctx, results, t0.Add(time.Duration(seq)*time.Second)) {
			if a.Err != nil {
				b.Fatal(a.Err)
			}
		}
	}
	cpu := redistest.CPU(b, rdb)
	b.ResetTimer()
	for b.Loop() {
		apply()
	}
	b.StopTimer()
	b.ReportMetric(float64(redistest.CPU(b, rdb)-cpu)/float64(b.N*batch)/1e3, "redis-cpu-µs/result")
	for seq < 50*jobs {
		apply()
	}
	var bytes, entries int64
	iter := rdb.Scan(ctx, 0, "bench:*:hist:*", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			b.Fatalf("memory usage of %s: %v", iter.Val(), err)
		}
		l, err := rdb.LLen(ctx, iter.Val()).Result()
		if err != nil {
			b.Fatal(err)
		}
		bytes, entries = bytes+n, entries+l
	}
	if err := iter.Err(); err != nil || entries < 50*jobs {
		b.Fatalf("%d history entries found: %v", entries, err)
	}
	b.ReportMetric(float64(bytes)/float64(entries), "history-bytes/entry")
	b.ReportMetric(float64(len(message)), "message-bytes")
}

// benchStore is a store on a new redis-server with collection c of n jobs j0…j<n-1>, every
// minute, all due at t0.
func benchStore(b *testing.B, n int) (*store.Store, *redis.Client) {
	b.Helper()
	ctx := context.Background()
	rdb := redistest.Start(b).Client(b)
	s := store.New(rdb, "bench")
	if _, err := s.PutCollection(ctx, "c", []byte(`{}`), job.CollectionEnabled, 0, false); err != nil {
		b.Fatal(err)
	}
	def := []byte(`{"startTime":"2026-01-01T12:00:00Z","recurrence":{"frequency":"Minute"}}` + "\n" + `{"type":"Http"}`)
	for i := range n {
		if _, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "c", Name: fmt.Sprint("j", i), Definition: def,
			Accepted: t0, Next: t0, State: job.StateEnabled, Reaccept: true}); err != nil {
			b.Fatal(err)
		}
	}
	return s, rdb
}

// BenchmarkApplyResultsReplicated applies batches of 256 results on a master with a replica,
// without waiting and waiting for the replica (WithMinReplicas): the cost of the WAIT, a round
// trip of the master to its replica per batch.
func BenchmarkApplyResultsReplicated(b *testing.B) {
	const jobs, batch = 2_000, 256
	ctx := context.Background()
	master := redistest.Start(b, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	_, port, _ := net.SplitHostPort(master.Addr)
	redistest.Start(b, redistest.WithArgs("--replicaof", "127.0.0.1", port))
	rdb := master.Client(b)
	def := []byte(`{"startTime":"2026-01-01T12:00:00Z","recurrence":{"frequency":"Minute"}}` + "\n" + `{"type":"Http"}`)
	for _, replicas := range []int{0, 1} {
		s := store.New(rdb, "bench", store.WithMinReplicas(replicas, time.Second))
		// The jobs; the first write waits for the replica to have loaded what it was sent.
		testenv.Eventually(b, 20*time.Second, "a first write acknowledged", func() bool {
			_, err := s.PutCollection(ctx, "c", []byte(`{}`), job.CollectionEnabled, 0, false)
			return err == nil
		})
		for i := range jobs {
			if _, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "c", Name: fmt.Sprint("j", i), Definition: def,
				Accepted: t0, Next: t0, State: job.StateEnabled, Reaccept: true}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			seq := 0
			results := make([]store.Result, batch)
			b.ResetTimer()
			for b.Loop() {
				for i := range results {
					seq++
					at := t0.Add(time.Duration(seq) * time.Second)
					results[i] = store.Result{Collection: "c", Job: fmt.Sprint("j", seq%jobs), Outcome: store.Outcome{
						ID: fmt.Sprintf("r%d-%d", replicas, seq), Scheduled: at, Occurrence: 1, MainDone: true,
						Entry: job.HistoryEntry{StartTime: at, EndTime: at, ExpectedExecutionTime: at,
							ActionName: job.ActionNameMain, Status: job.ExecutionCompleted, Message: "Http Status: 200 OK"}}}
				}
				for _, a := range s.ApplyResults(ctx, results, t0) {
					if a.Err != nil {
						b.Fatal(a.Err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/result")
		})
	}
}

// BenchmarkRepartition moves a store of 100 collections of 20 jobs (each with a history entry)
// from 16 partitions to 64, against a real redis-server: the time of planner -repartition per
// job moved, for docs/scaling.md.
func BenchmarkRepartition(b *testing.B) {
	const colls, jobs = 100, 20
	ctx := context.Background()
	rdb := redistest.Start(b).Client(b)
	moved, round := 0, 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		round++
		prefix := fmt.Sprint("bench", round)
		before := store.New(rdb, prefix, store.WithPartitions(16))
		if err := before.CheckLayout(ctx); err != nil {
			b.Fatal(err)
		}
		for c := range colls {
			name := fmt.Sprint("c", c)
			if _, err := before.PutCollection(ctx, name, []byte(`{}`), job.CollectionEnabled, 0, false); err != nil {
				b.Fatal(err)
			}
			writes := make([]store.Write, jobs)
			for j := range writes {
				writes[j] = store.Write{Put: &store.PutJob{Collection: name, Name: fmt.Sprint("j", j), Definition: []byte(`{"x":1}`),
					Accepted: t0, Next: t0.Add(time.Hour), State: job.StateEnabled, Reaccept: true}}
			}
			for _, a := range before.Apply(ctx, writes) {
				if a.Err != nil {
					b.Fatal(a.Err)
				}
			}
			for j := range jobs {
				if err := before.AppendHistory(ctx, name, fmt.Sprint("j", j), job.HistoryEntry{StartTime: t0, EndTime: t0,
					ExpectedExecutionTime: t0, ActionName: job.ActionNameMain, Status: job.ExecutionCompleted}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		r, err := store.New(rdb, prefix, store.WithPartitions(64)).Repartition(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		moved += r.Jobs
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(moved, 1)), "ns/job")
}
