package api_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/shared/jobschema"
)

// otherPlanner is a second planner's service on the same Redis: what it writes, this
// planner's API learns only from Redis.
func otherPlanner(t *testing.T, e *env) *jobs.Service {
	t.Helper()
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	return jobs.New(jobs.Config{Store: e.store, Validator: v, Subjects: bus.NewSubjects("")})
}

// A planner keeps the collections its puts were checked against; a put is still checked
// against the collection as it is when written, whoever changed it meanwhile.
func TestPutIsCheckedAgainstACollectionChangedByAnotherPlanner(t *testing.T) {
	e := newEnv(t)
	other := otherPlanner(t, e)
	e.putCollection(t, "c", `{}`)
	everyMinute := strings.Replace(hourly, `"frequency": "Hour"`, `"frequency": "Minute"`, 1)
	e.ok(t, "jobs.put.c.a", everyMinute, nil) // the collection as it was is now kept

	strict := []byte(`{"properties": {"quota": {"maxRecurrence": {"frequency": "Hour", "interval": 1}}}}`)
	if _, _, err := other.PutCollection(t.Context(), "c", strict, false); err != nil {
		t.Fatal(err)
	}
	a := e.fail(t, "jobs.put.c.b", everyMinute, "409", "Conflict")
	if !strings.Contains(a.Error.Message, "maxRecurrence") {
		t.Fatalf("refused for %q, want the new quota", a.Error.Message)
	}
	e.fail(t, "jobs.get.c.b", "", "404", "ResourceNotFound")
	e.ok(t, "jobs.put.c.b", hourly, nil) // what the new quota allows is written

	// Changed again, to what allows the put: it is checked again and written.
	if _, _, err := other.PutCollection(t.Context(), "c", []byte(`{"properties": {}}`), false); err != nil {
		t.Fatal(err)
	}
	e.ok(t, "jobs.put.c.b", everyMinute, nil)
	e.ok(t, "jobs.get.c.b", "", nil)
	// Written again, still allowing it: Redis refuses the generation kept, and the put is
	// checked again and written.
	if _, _, err := other.PutCollection(t.Context(), "c", []byte(`{"properties": {}}`), false); err != nil {
		t.Fatal(err)
	}
	e.ok(t, "jobs.put.c.e", everyMinute, nil)

	// Deleted and made again by the other planner, now strict: the generation this planner
	// kept is never one a new collection gets.
	e.putCollection(t, "d", `{}`)
	e.ok(t, "jobs.put.d.a", everyMinute, nil)
	if err := other.DeleteCollection(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.PutCollection(t.Context(), "d", strict, false); err != nil {
		t.Fatal(err)
	}
	e.fail(t, "jobs.put.d.b", everyMinute, "409", "Conflict")
}

// Puts to a collection the planner holds do not read it again, for a while.
func TestPutsReadTheirCollectionOnce(t *testing.T) {
	e := newEnv(t)
	e.putCollection(t, "c", `{}`)
	e.ok(t, "jobs.put.c.first", hourly, nil)
	before := collectionReads(t, e)
	for i := range 20 {
		e.ok(t, "jobs.put.c.j"+strconv.Itoa(i), hourly, nil)
	}
	if n := collectionReads(t, e) - before; n != 0 {
		t.Fatalf("20 puts read the collection %d times, want none", n)
	}
	// Kept for a while only: a planner of a version before generations may have changed it.
	e.clock.Add(int64(11 * time.Second))
	for i := range 3 {
		e.ok(t, "jobs.put.c.later"+strconv.Itoa(i), hourly, nil)
	}
	if n := collectionReads(t, e) - before; n != 1 {
		t.Fatalf("3 puts 11 s later read the collection %d times, want once", n)
	}
}

// collectionReads is how many times Redis was asked for a whole collection hash.
func collectionReads(t *testing.T, e *env) int {
	t.Helper()
	info, err := e.redis.Client(t).Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(info, "cmdstat_hgetall:calls=")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(after[:strings.IndexByte(after, ',')])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
