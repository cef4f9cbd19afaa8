package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
)

// wakeRecorder records what onWake hands a dispatcher.
type wakeRecorder struct {
	mu      sync.Mutex
	woken   []int
	changed map[int][]string
}

func (r *wakeRecorder) Wake(p int) { r.mu.Lock(); defer r.mu.Unlock(); r.woken = append(r.woken, p) }
func (r *wakeRecorder) Changed(p int, jobs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed[p] = append(r.changed[p], jobs...)
}

// What one planner's jobs service says over NATS reaches the dispatcher of the planner
// holding the partition as it was said: a wake-up as a wake-up, changed jobs one by one, those
// of a large batch (an intake's thousands of deletes) in messages of at most 32 KB each.
func TestChangedJobsReachTheDispatcherOverNATS(t *testing.T) {
	ns := natstest.Start(t)
	subjects := bus.NewSubjects("")
	rec := &wakeRecorder{changed: map[int][]string{}}
	sub, err := ns.Connect(t).Subscribe(subjects.Wake("*"), onWake(rec))
	if err != nil {
		t.Fatal(err)
	}
	sized, err := ns.Connect(t).SubscribeSync(subjects.Wake("61"))
	if err != nil {
		t.Fatal(err)
	}
	nc := ns.Connect(t)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	many := make([]string, 5000)
	for i := range many {
		many[i] = fmt.Sprintf("collection-%04d/job-%04d", i%7, i)
	}
	w := natsWaker{nc: nc, subjects: subjects}
	w.Wake(3)
	w.Changed(3, []string{"c/j", "c/"})
	w.Changed(61, many)
	w.Changed(62, nil)
	testenv.Eventually(t, 5*time.Second, "everything said received", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.changed[61]) == len(many)
	})
	_ = sub.Unsubscribe()
	var sizes []int
	for m, err := sized.NextMsg(time.Second); err == nil; m, err = sized.NextMsg(time.Second) {
		sizes = append(sizes, len(m.Data))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if fmt.Sprint(rec.woken) != "[3]" || fmt.Sprint(rec.changed[3]) != "[c/j c/]" || !slices.Equal(rec.changed[61], many) || len(rec.changed) != 2 {
		t.Fatalf("woken %v, changed %d partitions: 3: %v, 61 the same as said: %v", rec.woken, len(rec.changed), rec.changed[3], slices.Equal(rec.changed[61], many))
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total < 120_000 || slices.Max(sizes) > changedPayload {
		t.Fatalf("%d bytes in %d messages of at most %d bytes; want 120 KB in messages of at most %d", total, len(sizes), slices.Max(sizes), changedPayload)
	}
}

// A wake-up for a partition this planner holds goes to its own dispatcher and not through NATS;
// one for a partition another planner holds goes over NATS. A change for a held partition
// reaches the planner's own dispatcher before Changed returns (before the answer), and goes
// over NATS as well, for a planner that held the partition a moment ago.
func TestAWakeUpForAHeldPartitionStaysInThePlanner(t *testing.T) {
	ns := natstest.Start(t)
	subjects := bus.NewSubjects("")
	heard, err := ns.Connect(t).SubscribeSync(subjects.Wake("*"))
	if err != nil {
		t.Fatal(err)
	}
	nc := ns.Connect(t)
	local := &wakeRecorder{changed: map[int][]string{}}
	w := natsWaker{nc: nc, subjects: subjects, local: local, held: func(p int) bool { return p == 3 }}
	w.Wake(3)
	w.Wake(4)
	w.Changed(3, []string{"c/j"})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var over []string
	for m, err := heard.NextMsg(time.Second); err == nil; m, err = heard.NextMsg(200 * time.Millisecond) {
		over = append(over, m.Subject+" "+string(m.Data))
	}
	local.mu.Lock()
	defer local.mu.Unlock()
	if fmt.Sprint(local.woken) != "[3]" || fmt.Sprint(local.changed) != "map[3:[c/j]]" {
		t.Errorf("the planner's own dispatcher was woken for %v and told of changes %v; want partition 3 woken and its change", local.woken, local.changed)
	}
	if fmt.Sprint(over) != "[scheduler.planner.wake.4  scheduler.planner.wake.3 c/j]" {
		t.Errorf("over NATS: %q; want partition 4's wake-up and the change", over)
	}
}

// A job deleted through the API while the planner holds its occurrence for its time does not
// fire; another job due at the same time fires. The lookahead is long here (5 s, within a lease
// of 10 s) so that the occurrence is held for seconds after the planner claimed it (its metric
// says when); at the default 250 ms a job firing every second fired after its delete was
// answered a quarter of the time under make run.
func TestAJobDeletedWhileItsOccurrenceIsHeldDoesNotFire(t *testing.T) {
	ns := natstest.Start(t)
	deleteWhileHeld(t, ns, ns.ClientURL(), 0)
}

// The same with the server refusing the planner's notices on the wake subjects: the one
// planner holds every partition, so the notice it gives its own dispatcher is what keeps the
// deleted job from firing (it fired without it).
func TestAHeldPartitionHearsOfItsChangesWithoutNATS(t *testing.T) {
	ns := natstest.Start(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "admin", Password: "admin"}, {Username: "planner", Password: "planner",
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"scheduler.planner.wake.>"}}}}}
		o.NoAuthUser = "admin" // the test's own connections
	})
	// Nothing due, the partition would not look again for an hour: a job put due at once is
	// published because the planner woke its own dispatcher.
	base, nc := deleteWhileHeld(t, ns, strings.Replace(ns.ClientURL(), "nats://", "nats://planner:planner@", 1), time.Hour)
	request(t, nc, "scheduler.api.jobs.put.c.now", `{"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}`)
	testenv.Eventually(t, 20*time.Second, "the job put due at once published", func() bool { return counter(t, base, "published_total") >= 2 })
}

// deleteWhileHeld runs a planner connected as natsURL says (and its MaxIdle, unless 0), and
// deletes one of two jobs while the planner holds their occurrences for their time: the other
// alone may fire. It answers the planner's HTTP address and a connection of the test's.
func deleteWhileHeld(t *testing.T, ns *natstest.Server, natsURL string, maxIdle time.Duration) (string, *nats.Conn) {
	cfg := testConfig(natsURL, redistest.Start(t).URL())
	cfg.Lease, cfg.Lookahead = 10*time.Second, 5*time.Second
	if maxIdle > 0 {
		cfg.MaxIdle = maxIdle
	}
	base, _, _ := started(t, cfg)
	waitReady(t, base)
	nc := ns.Connect(t)
	request(t, nc, "scheduler.api.collections.put.c", `{"properties":{}}`)
	due := time.Now().UTC().Truncate(time.Second).Add(5 * time.Second) // 4-5 s from now
	for _, j := range []string{"deleted", "kept"} {
		request(t, nc, "scheduler.api.jobs.put.c."+j, `{"startTime":"`+due.Format(time.RFC3339)+
			`","action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}}}`)
	}
	testenv.Eventually(t, 10*time.Second, "both jobs claimed", func() bool { return counter(t, base, "claimed_total") >= 2 })
	if time.Now().After(due.Add(-100 * time.Millisecond)) {
		t.Skip("the machine was too slow to delete the job before its time")
	}
	request(t, nc, "scheduler.api.jobs.delete.c.deleted", "")
	testenv.Eventually(t, 10*time.Second, "the kept job's occurrence published", func() bool { return counter(t, base, "published_total") >= 1 })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(dueSubjects(t, js)); got != "map[scheduler.due.c.kept:1]" {
		t.Fatalf("the due stream holds %s; want the kept job's occurrence alone", got)
	}
	return base, nc
}
