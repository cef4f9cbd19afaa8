package dispatch

import (
	"encoding/json"
	"fmt"

	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// compiled is what firing a job needs from its definition, kept so a hot job is decoded and
// compiled once per version rather than once per fire.
type compiled struct {
	version int64 // never repeats within a partition (store.PutJob), so it names one definition
	sched   *recurrence.Schedule
	catchUp job.CatchUpPolicy // the job's own policy; "" for the deployment's
	action  json.RawMessage
}

// compileEntry decodes only the schedule part of a stored definition; the action stays the
// JSON it was stored as and goes into each due message untouched.
func compileEntry(rec *store.Job) (*compiled, error) {
	p, action, err := jobs.SplitBlob(rec.Definition)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", rec.Collection, rec.Name, err)
	}
	sched, err := jobs.Compile(p, rec.Accepted)
	if err != nil {
		return nil, fmt.Errorf("compile %s/%s: %w", rec.Collection, rec.Name, err)
	}
	c := &compiled{version: rec.Version, sched: sched, action: action}
	if p.Recurrence != nil {
		c.catchUp = p.Recurrence.CatchUpPolicy
	}
	return c, nil
}

// scheduleCache is owned by one partition's dispatch goroutine, so it needs no lock. When full it forgets
// an arbitrary entry: simple, and a miss only costs one decode and compile.
type scheduleCache struct {
	max int
	m   map[string]*compiled
}

func newScheduleCache(max int) *scheduleCache {
	return &scheduleCache{max: max, m: make(map[string]*compiled)}
}

func (c *scheduleCache) get(rec *store.Job) (*compiled, error) {
	key := store.Member(rec.Collection, rec.Name)
	if e, ok := c.m[key]; ok && e.version == rec.Version {
		return e, nil
	}
	e, err := compileEntry(rec)
	if err != nil {
		return nil, err
	}
	if len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = e
	return e, nil
}

// holds reports whether a compiled definition of member is kept, of whatever version.
func (c *scheduleCache) holds(member string) bool {
	_, ok := c.m[member]
	return ok
}

// current returns the kept compiled definition of rec's version, or nil.
func (c *scheduleCache) current(rec *store.Job) *compiled {
	if e, ok := c.m[store.Member(rec.Collection, rec.Name)]; ok && e.version == rec.Version {
		return e
	}
	return nil
}
