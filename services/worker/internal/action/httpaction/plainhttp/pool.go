package plainhttp

import (
	"sync"
	"time"
)

// pool keeps idle connections by address, the last one put taken first.
type pool struct {
	maxPerAddr, max int
	timeout         time.Duration
	now             func() time.Time

	mu     sync.Mutex
	byAddr map[string][]*conn
	count  int
	timer  *time.Timer // closes connections idle past the timeout while any is kept
}

func newPool(maxPerAddr, max int, timeout time.Duration, now func() time.Time) *pool {
	return &pool{maxPerAddr: maxPerAddr, max: max, timeout: timeout, now: now, byAddr: map[string][]*conn{}}
}

// get takes the connection of addr put last, or nil.
func (p *pool) get(addr string) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.byAddr[addr]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	list[len(list)-1] = nil
	p.byAddr[addr] = list[:len(list)-1]
	p.count--
	return c
}

// put keeps c, or closes it when the pool is full.
func (p *pool) put(addr string, c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count >= p.max || len(p.byAddr[addr]) >= p.maxPerAddr {
		_ = c.nc.Close()
		return
	}
	c.since = p.now()
	p.byAddr[addr] = append(p.byAddr[addr], c)
	p.count++
	if p.timer == nil {
		p.timer = time.AfterFunc(p.timeout, p.expire)
	}
}

// expire closes the connections idle longer than the timeout, and looks again while any is
// kept.
func (p *pool) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	p.closeIdle(p.now().Add(-p.timeout))
	if p.count > 0 {
		p.timer = time.AfterFunc(p.timeout/2, p.expire)
	}
}

// closeIdle closes the connections idle since before the cut; the oldest are first in each list.
func (p *pool) closeIdle(cut time.Time) {
	for addr, list := range p.byAddr {
		n := 0
		for n < len(list) && list[n].since.Before(cut) {
			_ = list[n].nc.Close()
			n++
		}
		p.count -= n
		if n == len(list) {
			delete(p.byAddr, addr)
			continue
		}
		kept := copy(list, list[n:])
		clear(list[kept:]) // no closed connection held by the array
		p.byAddr[addr] = list[:kept]
	}
}

// closeAll closes every idle connection.
func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, list := range p.byAddr {
		for _, c := range list {
			_ = c.nc.Close()
		}
		delete(p.byAddr, addr)
	}
	p.count = 0
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}
