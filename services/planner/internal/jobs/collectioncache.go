package jobs

import (
	"sync"
	"time"

	"github.com/resched/resched/shared/job"
)

// collectionCache keeps the collections puts were checked against, with their generation
// (store.Collection.Generation), so that a batch of puts need not read its collection first:
// that read was a round trip and about a fifteenth of a put's CPU. A stale entry is harmless:
// each put names the generation it was checked against, Redis refuses it when the collection
// was written since (store.ErrCollectionChanged), and the put is checked again against the
// collection read anew (Service.recheck); a put a kept collection refuses is checked again
// against the collection read anew before it is refused (Service.write). Collections written
// before generations were kept have none and are never kept here. An entry is also read anew
// after collectionKeepFor: a planner of a version before generations, during a rolling
// upgrade, writes a collection without changing its generation, and this bounds how long such
// a change goes unseen.
type collectionCache struct {
	mu sync.Mutex
	m  map[string]cachedCollection
}

type cachedCollection struct {
	coll       *job.Collection // read only once cached
	generation string
	read       time.Time // when it was read
	kept       bool      // taken from the cache rather than read
}

// maxCachedCollections bounds the cache; when full it starts again empty, which costs one read
// per collection.
const maxCachedCollections = 4096

// collectionKeepFor is how long a collection is used before it is read again.
const collectionKeepFor = 10 * time.Second

func newCollectionCache() *collectionCache {
	return &collectionCache{m: make(map[string]cachedCollection)}
}

func (c *collectionCache) get(name string, now time.Time) (cachedCollection, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[name]
	if ok && now.Sub(e.read) >= collectionKeepFor {
		delete(c.m, name)
		ok = false
	}
	e.kept = ok
	return e, ok
}

func (c *collectionCache) put(name string, e cachedCollection) {
	if e.generation == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedCollections {
		clear(c.m)
	}
	c.m[name] = e
}

func (c *collectionCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}
