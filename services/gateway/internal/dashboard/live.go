package dashboard

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// hub follows what happens: the planners' events and the workers' results (core NATS
// subscriptions beside the streams, so it takes nothing from them). It counts fires and
// failures per minute for the last hour, keeps the latest failures, and passes every message to
// the live pages allowed to see its collection.
type hub struct {
	scopes *scopes
	now    func() time.Time

	mu       sync.Mutex
	minutes  [60]counts // by minute of the hour
	backlog  [60]sample // the due backlog, by minute of the hour
	failures []failure
	subs     map[*subscriber]struct{}
}

// minute counts the first attempts (fires) and the failed attempts of one minute, and the due
// backlog then (nil when not sampled).
type minute struct {
	At      int64   `json:"at"` // unix seconds of the minute's start
	Fires   int     `json:"fires"`
	Failed  int     `json:"failed"`
	Backlog *uint64 `json:"backlog,omitempty"`
}

// sample is the due backlog seen in a minute: the most occurrences waiting for a worker.
type sample struct {
	at      int64
	waiting uint64
}

// counts are one minute's figures per collection, so a page sums only what it may see.
type counts struct {
	at  int64
	per map[string]*minute
}

// failure is a failed attempt, for the overview.
type failure struct {
	Collection string    `json:"collection"`
	Job        string    `json:"job"`
	At         time.Time `json:"at"`
	Status     string    `json:"status"`
	Message    string    `json:"message,omitempty"`
	Faulted    bool      `json:"faulted"`
}

// live is one message to a page: an event or a result, and its collection.
type live struct {
	Kind       string          `json:"kind"` // "event" or "result"
	Collection string          `json:"collection"`
	Job        string          `json:"job"`
	Data       json.RawMessage `json:"data"`
}

type subscriber struct {
	grant access.Grant
	out   chan []byte
}

const keptFailures = 30

func newHub(s *scopes) *hub {
	return &hub{scopes: s, now: time.Now, subs: map[*subscriber]struct{}{}}
}

// start subscribes to the events and the results.
func (h *hub) start(nc *nats.Conn, subjects bus.Subjects) error {
	if _, err := nc.Subscribe(subjects.Prefix+".events.>", func(m *nats.Msg) { h.onEvent(m.Data) }); err != nil {
		return err
	}
	_, err := nc.Subscribe(subjects.Prefix+".results.>", func(m *nats.Msg) { h.onResults(m.Data) })
	return err
}

func (h *hub) onEvent(data []byte) {
	var e bus.Event
	if json.Unmarshal(data, &e) != nil {
		return
	}
	h.send(live{Kind: "event", Collection: e.Collection, Job: e.Job, Data: data})
}

// onResults takes a results message: one result, or a worker's batch of several (an array).
// Every result of the system comes through here.
func (h *hub) onResults(data []byte) {
	if len(data) > 0 && data[0] == '[' {
		rs, err := bus.DecodeResults(data)
		if err != nil {
			return
		}
		for _, r := range rs {
			h.onResult(r)
		}
		return
	}
	if r, err := bus.DecodeResult(data); err == nil {
		h.onResult(r)
	}
}

func (h *hub) onResult(r bus.Result) {
	at := r.StartTime
	if at.IsZero() {
		at = h.now()
	}
	h.mu.Lock()
	c := &h.minutes[at.Unix()/60%60]
	if start := at.Unix() / 60 * 60; c.at != start {
		*c = counts{at: start, per: map[string]*minute{}}
	}
	m := c.per[r.Collection]
	if m == nil {
		m = &minute{}
		c.per[r.Collection] = m
	}
	if r.ActionName == job.ActionNameMain && r.Attempt == 0 && r.Delivery <= 1 {
		m.Fires++ // not a delivery past a policy without retries, which runs attempt 0 again
	}
	if r.Status == job.ExecutionFailed {
		m.Failed++
		h.failures = append(h.failures, failure{Collection: r.Collection, Job: r.Job, At: at, Status: string(r.Status),
			Message: r.Message, Faulted: r.Faulted})
		if len(h.failures) > keptFailures {
			h.failures = h.failures[len(h.failures)-keptFailures:]
		}
	}
	h.mu.Unlock()
	if !h.listened() {
		return
	}
	// The page gets the result without the target's answer: the history has it.
	r.Message = ""
	slim, _ := json.Marshal(r)
	h.send(live{Kind: "result", Collection: r.Collection, Job: r.Job, Data: slim})
}

// send passes a message to every page allowed to see its collection; a page that does not keep
// up loses messages rather than holding the others.
func (h *hub) send(l live) {
	if !h.listened() {
		return // no page open: no scope to look up
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	scope, ok := h.scopes.of(ctx, l.Collection)
	if !ok {
		return // deleted meanwhile, or the planners do not answer
	}
	data, err := json.Marshal(l)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !visible(s.grant, scope) {
			continue
		}
		select {
		case s.out <- data:
		default:
		}
	}
}

// listened reports whether a live page is open.
func (h *hub) listened() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

func (h *hub) subscribe(g access.Grant) *subscriber {
	s := &subscriber{grant: g, out: make(chan []byte, 256)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// lastHour is the per-minute counts of the last 60 minutes, oldest first, and the latest
// failures the grant may see, newest first.
func (h *hub) lastHour(ctx context.Context, g access.Grant) ([]minute, []failure) {
	now := h.now().Unix() / 60 * 60
	h.mu.Lock()
	per := make([]map[string]minute, 60)
	for i := range 60 {
		at := now - int64(59-i)*60
		c := h.minutes[at/60%60]
		per[i] = map[string]minute{}
		if c.at == at {
			for coll, m := range c.per {
				per[i][coll] = *m
			}
		}
	}
	fails := append([]failure(nil), h.failures...)
	h.mu.Unlock()
	backlog := h.backlog
	out := make([]minute, 60)
	for i := range 60 {
		out[i].At = now - int64(59-i)*60
		if b := backlog[out[i].At/60%60]; b.at == out[i].At {
			w := b.waiting
			out[i].Backlog = &w
		}
		for coll, m := range per[i] {
			if sc, ok := h.scopes.of(ctx, coll); ok && visible(g, sc) {
				out[i].Fires += m.Fires
				out[i].Failed += m.Failed
			}
		}
	}
	seen := []failure{}
	for i := len(fails) - 1; i >= 0; i-- {
		if sc, ok := h.scopes.of(ctx, fails[i].Collection); ok && visible(g, sc) {
			seen = append(seen, fails[i])
		}
	}
	return out, seen
}

// record keeps a backlog sample: the largest of the minute.
func (h *hub) record(waiting uint64) {
	at := h.now().Unix() / 60 * 60
	h.mu.Lock()
	defer h.mu.Unlock()
	b := &h.backlog[at/60%60]
	if b.at != at || waiting > b.waiting {
		*b = sample{at: at, waiting: waiting}
	}
}

// sampleBacklog records the due backlog every 20 s until ctx ends.
func (h *hub) sampleBacklog(ctx context.Context, read func(context.Context) (map[string]uint64, bool)) {
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if b, ok := read(rctx); ok {
			h.record(b["waiting"])
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
