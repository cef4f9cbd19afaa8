package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/resched/resched/services/planner/internal/store"
)

// changeWatch gathers, while a batch of one partition is read and sent, the jobs that changed
// meanwhile through any planner (put again, deleted, disabled, or their collection disabled or
// deleted), as Dispatcher.Changed hears of them. An occurrence read before such a change and
// held for its time (the lookahead) is then not sent: it went out after the change had been
// answered (a job firing every second fired once more after its delete, a quarter of the
// time). Its job is not advanced, and the next batch reads it as the change left it; a job
// changed in a way that leaves it due only fires a moment later.
type changeWatch struct {
	heard atomic.Bool // a change was heard this batch: until then a send costs one load
	mu    sync.Mutex
	open  bool            // a batch is under way
	jobs  map[string]bool // due-set members (store.Member), c's with no job name for all of c's
}

// begin starts watching for a batch, forgetting what the last one heard.
func (w *changeWatch) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open, w.jobs = true, nil
	w.heard.Store(false)
}

// end stops watching: what is heard until the next batch concerns nothing read.
func (w *changeWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open, w.jobs = false, nil
	w.heard.Store(false)
}

// add records changed jobs, or collections, by member while a batch is under way.
func (w *changeWatch) add(jobs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.open {
		return
	}
	if w.jobs == nil {
		w.jobs = make(map[string]bool, len(jobs))
	}
	for _, j := range jobs {
		w.jobs[j] = true
	}
	w.heard.Store(true)
}

// changed reports whether job j of collection c, or c, changed since the batch began.
func (w *changeWatch) changed(c, j string) bool {
	if !w.heard.Load() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jobs[store.Member(c, j)] || w.jobs[store.Member(c, "")]
}
