package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

// A change whose check panics (here: a service without its validator, standing for a bug that
// a definition trips) is refused alone, an internal error, with the stack in the log and
// nothing of the definition: the batch's other changes apply, and the intake does not take it
// up again (it stopped the planner reading it, then the next).
func TestAChangeWhoseCheckPanicsIsRefusedAlone(t *testing.T) {
	var logged bytes.Buffer
	s := &Service{log: slog.New(slog.NewTextHandler(&logged, nil))}
	ctx, colls, now := context.Background(), map[string]cachedCollection{}, time.Now()
	_, def, err := s.checked(ctx, Change{Collection: "c", Name: "j", Raw: []byte(`{"secret": "hunter2"}`)}, colls, now)
	var e *Error
	if !errors.As(err, &e) || e.Status != 500 || e.Code != CodeInternal || def != nil ||
		!strings.Contains(e.Message, "internal error") || !strings.Contains(e.Message, "not stored") {
		t.Fatalf("checked: %v (%+v), definition %v; want a 500 InternalError saying it was not stored", err, e, def)
	}
	out := logged.String()
	for _, want := range []string{"level=ERROR", "panic recovered: check of a job definition", "collection=c", "job=j", "stack="} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(e.Error(), "hunter2") {
		t.Errorf("the definition is in the log or the error:\n%s\n%v", out, e)
	}
	if w, _, err := s.checked(ctx, Change{Collection: "c", Name: "k", Delete: true}, colls, now); err != nil || w.Delete == nil {
		t.Errorf("a delete beside it: %+v, %v; want its write", w, err)
	}
}

// A batch whose checks take half the time its request allows stops checking: what was checked
// is stored in time, and the changes left are neither checked nor stored (ErrNotChecked, to be
// sent again), so that definitions slow to check (a client certificate's key derivation) hold
// the planner no longer than the request's deadline. The first change is always checked.
func TestABatchStopsCheckingHalfWayToItsDeadline(t *testing.T) {
	s, st, start := slowChecks(t)
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(10*time.Second))
	defer cancel()
	def := []byte(hourlyDefinition)
	out := s.Apply(ctx, []Change{{Collection: "c", Name: "a", Raw: def}, {Collection: "c", Name: "b", Raw: def}, {Collection: "c", Name: "x", Raw: []byte(`not json`)}})
	if out[0].Err != nil || !out[0].Created {
		t.Errorf("the first change: %+v; want it stored", out[0])
	}
	for i, name := range []string{"b", "x"} {
		if o := out[i+1]; !errors.Is(o.Err, ErrNotChecked) {
			t.Errorf("change %s: %v; want ErrNotChecked (not even read)", name, o.Err)
		}
	}
	if _, err := st.GetJob(ctx, "c", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("b: %v; want it not stored", err)
	}
}

// The API's puts gathered into one batch are each their own caller's: those a round leaves
// unchecked go in the next round rather than failing for the puts before them.
func TestGatheredPutsLeftUncheckedGoInTheNextRound(t *testing.T) {
	s, _, _ := slowChecks(t)
	ctx := context.Background()
	v := s.validator
	var batch []*pendingPut
	for _, name := range []string{"a", "b", "c", "d"} {
		def, err := v.Decode([]byte(hourlyDefinition))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, &pendingPut{change: Change{Collection: "c", Name: name, Decoded: def}, done: make(chan struct{})})
	}
	s.puts.queue = batch[1:] // queued by other callers, taken with the first into one batch
	s.puts.put(ctx, s, batch[0])
	for _, p := range batch {
		<-p.done
		if p.err != nil || !p.created {
			t.Errorf("put %s: created %v, %v; want it stored", p.change.Name, p.created, p.err)
		}
	}
}

const hourlyDefinition = `{"properties": {"action": {"type": "Http", "request": {"uri": "https://example.com/", "method": "GET"}}, "recurrence": {"frequency": "Hour"}}}`

// slowChecks is a service on a Redis of its own, with collection c, whose wall clock finds 6 s
// more gone at each look: the checks of a batch seem to take that long each. start is its
// first look.
func slowChecks(t *testing.T) (*Service, *store.Store, time.Time) {
	t.Helper()
	st := store.New(redistest.Start(t).Client(t), "test")
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var looks int
	s := New(Config{Store: st, Validator: v, Wall: func() time.Time {
		looks++
		return start.Add(time.Duration(looks-1) * 6 * time.Second)
	}})
	if _, err := st.PutCollection(context.Background(), "c", []byte(`{}`), job.CollectionEnabled, 0, false); err != nil {
		t.Fatal(err)
	}
	return s, st, start
}

// wakeCounter counts the wake-ups a Service gives each partition.
type wakeCounter map[int]int

func (w wakeCounter) Wake(p int)                { w[p]++ }
func (w wakeCounter) Changed(p int, _ []string) {}

// A batch of jobs due soon wakes each partition it put them in once, not once a job: over NATS
// (another planner holds the partition) each wake-up is a message through the server.
func TestABatchWakesEachPartitionOnce(t *testing.T) {
	ctx := context.Background()
	st := store.New(redistest.Start(t).Client(t), "test")
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	woken := wakeCounter{}
	s := New(Config{Store: st, Validator: v, Waker: woken, WakeWithin: time.Minute})
	var changes []Change
	for _, c := range []string{"c", "d"} {
		if _, err := st.PutCollection(ctx, c, []byte(`{}`), job.CollectionEnabled, 0, false); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"a", "b", "c", "d"} {
			changes = append(changes, Change{Collection: c, Name: name, Raw: []byte(`{"properties": {"action": {"type": "Http", "request": {"uri": "https://example.com/", "method": "GET"}}}}`)})
		}
	}
	changes = append(changes, Change{Collection: "d", Name: "later", Raw: []byte(hourlyDefinition)})
	for i, o := range s.Apply(ctx, changes) {
		if o.Err != nil || !o.Created {
			t.Fatalf("change %d: %+v; want it created", i, o)
		}
	}
	want := wakeCounter{st.PartitionOf("c"): 1}
	want[st.PartitionOf("d")] = 1
	if fmt.Sprint(woken) != fmt.Sprint(want) {
		t.Fatalf("wake-ups by partition: %v; want %v (one a partition: c's and d's)", woken, want)
	}
}
