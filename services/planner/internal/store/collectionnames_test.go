package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
)

// Collections are listed in name order a page at a time from a cursor, whatever the page size
// and the partition count, on one Redis and on a Redis Cluster, each once; a cursor that names
// no collection starts after it; they are counted.
func TestCollectionNamesPageInOrder(t *testing.T) {
	ctx := context.Background()
	type server struct {
		db    redis.UniversalClient
		parts int
	}
	rdb := redistest.Start(t).Client(t)
	servers := []server{{rdb, 1}, {rdb, 16}, {rdb, 64}}
	if !testing.Short() { // the partitions spread over three masters: a page's reads go to each
		servers = append(servers, server{redistest.StartCluster(t, 3, 0).Client(t), 16})
	}
	for _, sv := range servers {
		parts := sv.parts
		s := store.New(sv.db, fmt.Sprintf("p%d", parts), store.WithPartitions(parts))
		var all []string
		for _, i := range rand.Perm(300) {
			all = append(all, fmt.Sprintf("c%03d", i))
			putCollection(t, s, all[len(all)-1], 0)
		}
		slices.Sort(all)
		for _, n := range []int{1, 7, 100, 1000} {
			var listed []string
			for after := ""; ; {
				page, _, err := s.CollectionNamesAfter(ctx, after, n)
				if err != nil {
					t.Fatal(err)
				}
				listed = append(listed, page...)
				if len(page) < n {
					break
				}
				after = page[len(page)-1]
			}
			if !slices.Equal(listed, all) {
				t.Fatalf("%d partitions, pages of %d: listed %d names %v…, want the %d in order", parts, n, len(listed), listed[:min(5, len(listed))], len(all))
			}
		}
		if page, total, _ := s.CollectionNamesAfter(ctx, "c149x", 3); fmt.Sprint(page) != "[c150 c151 c152]" || total != len(all) {
			t.Fatalf("%d partitions: after c149x: %v, %d in all", parts, page, total)
		}
		if n, err := s.CollectionCount(ctx); n != len(all) || err != nil {
			t.Fatalf("%d partitions: counted %d collections (%v), want %d", parts, n, err, len(all))
		}
	}
}

// A page reads about its own number of names, not every collection's: reading all of them and
// sorting them took 29 ms a page of 1,000 among 50,000, and listing them all grew with the
// square of their number.
func TestAPageReadsAboutItsNames(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s := store.New(rdb, "test")
	const n = 3000
	for i := range n {
		putCollection(t, s, fmt.Sprintf("c%04d", i), 0)
	}
	var read atomic.Int64
	rdb.AddHook(namesRead{&read})
	for _, size := range []int{10, 100} {
		read.Store(0)
		page, _, err := s.CollectionNamesAfter(ctx, "c1500", size)
		if err != nil || len(page) != size || page[0] != "c1501" || page[size-1] != fmt.Sprintf("c%04d", 1500+size) {
			t.Fatalf("a page of %d after c1500: %v… %v", size, page[:min(3, len(page))], err)
		}
		if got := read.Load(); got > int64(4*size+16*8) {
			t.Fatalf("a page of %d read %d names of the %d", size, got, n)
		}
	}
}

// An index that disagrees with the set of names (a planner of an earlier release created or
// deleted a collection during a rolling upgrade, writing the set alone) is built again when a
// listing sees it; the first start of this release builds every partition's.
func TestAnIndexOutOfStepIsBuiltAgain(t *testing.T) {
	ctx := context.Background()
	rdb, s := collectionsABC(t)
	set, index := s.NameKeys("a")
	rdb.SAdd(ctx, set, "x") // created by an earlier release
	rdb.SRem(ctx, set, "b") // deleted by one
	if page, _, err := s.CollectionNamesAfter(ctx, "", 10); fmt.Sprint(page) != "[a c x]" || err != nil {
		t.Fatalf("listed %v %v, want [a c x]", page, err)
	}

	rdb.Del(ctx, index)
	rdb.HDel(ctx, s.Meta(), "cnames") // data of an earlier release
	if err := s.CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rdb.ZRange(ctx, index, 0, -1).Val(); fmt.Sprint(got) != "[a c x]" {
		t.Fatalf("the index after the first start: %v", got)
	}
}

// namesRead counts the names Redis answers to the listing's reads.
type namesRead struct{ n *atomic.Int64 }

func (namesRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h namesRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

func (h namesRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.count(c)
		}
		return err
	}
}

func (h namesRead) count(cmd redis.Cmder) {
	if c, ok := cmd.(*redis.StringSliceCmd); ok {
		h.n.Add(int64(len(c.Val())))
	}
}

// An index out of step is built again while Redis is at its maxmemory too (Redis lets a script
// whose first write is a delete write on), so a page at maxmemory leaves no name out.
func TestAnIndexOutOfStepAtMaxmemory(t *testing.T) {
	ctx := context.Background()
	rdb, s := collectionsABC(t)
	set, _ := s.NameKeys("a")
	rdb.SAdd(ctx, set, "x") // created by an earlier release
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	page, _, err := s.CollectionNamesAfter(ctx, "a", 10)
	if fmt.Sprint(page) != "[b c x]" || err != nil {
		t.Fatalf("listed %v %v at maxmemory, want [b c x]", page, err)
	}
}

// collectionsABC is a started store of one partition holding collections a, b and c.
func collectionsABC(t *testing.T) (*redis.Client, *store.Store) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	s := store.New(rdb, "test", store.WithPartitions(1))
	if err := s.CheckLayout(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b", "c"} {
		putCollection(t, s, c, 0)
	}
	return rdb, s
}

// A Redis that refuses the script that builds an index again (here a user allowed to read and
// not to run scripts) has the page read from the sets of names, every one: nothing is left out
// and the listing does not fail.
func TestAnIndexThatCannotBeBuiltIsReadFromTheSets(t *testing.T) {
	ctx := context.Background()
	rdb, admin := collectionsABC(t)
	set, _ := admin.NameKeys("a")
	rdb.SAdd(ctx, set, "x") // created by an earlier release
	if err := rdb.Do(ctx, "ACL", "SETUSER", "lister", "on", ">pw", "~*", "+@read", "+@connection").Err(); err != nil {
		t.Fatal(err)
	}
	lister := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Username: "lister", Password: "pw"})
	t.Cleanup(func() { _ = lister.Close() })
	s := store.New(lister, "test", store.WithPartitions(1))
	page, total, err := s.CollectionNamesAfter(ctx, "a", 10)
	if fmt.Sprint(page) != "[b c x]" || total != 4 || err != nil {
		t.Fatalf("listed %v (%d in all) %v, want [b c x] of 4", page, total, err)
	}
}
