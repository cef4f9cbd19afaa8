package testenv

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a server, and can cut them, as a
// network partition between one process and that server does while both keep running, or
// freeze them, as a server that hangs or a network that drops packets does; or freeze only
// those from some addresses, as a network split between the server and some of its peers.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	frozen chan struct{}            // closed by Thaw; nil while the link forwards
	apart  map[string]chan struct{} // by source IP, those FreezeFrom froze; closed by Thaw
	conns  map[net.Conn]struct{}
}

// StartProxy listens on a free loopback port and forwards to target until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target, apart: map[string]chan struct{}{}, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
	})
	return p
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every forwarded connection and closes new ones at once, until Mend.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
	p.thaw()
}

// Freeze stops forwarding until Thaw: the connections stay open and what is sent waits in
// them, and new connections are accepted but get no answer, so a client notices only by its
// own time-outs.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = make(chan struct{})
	}
}

// FreezeFrom freezes, until Thaw, the connections that come from ip: those open and those
// opened later. Processes that each open their connections from a loopback address of their
// own (all of 127.0.0.0/8 is loopback on Linux) can so be split from the server while others
// still reach it.
func (p *Proxy) FreezeFrom(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.apart[ip] == nil {
		p.apart[ip] = make(chan struct{})
	}
}

// Thaw forwards again, what waited first.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.thaw()
}

func (p *Proxy) thaw() {
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
	for ip, f := range p.apart {
		close(f)
		delete(p.apart, ip)
	}
}

// gate returns once the link is not frozen for connections from src.
func (p *Proxy) gate(src string) {
	for {
		p.mu.Lock()
		f := p.frozen
		if f == nil {
			f = p.apart[src]
		}
		p.mu.Unlock()
		if f == nil {
			return
		}
		<-f
	}
}

// Mend forwards new connections again.
func (p *Proxy) Mend() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed at the end of the test
		}
		go p.forward(in)
	}
}

func (p *Proxy) forward(in net.Conn) {
	from, _, _ := net.SplitHostPort(in.RemoteAddr().String())
	p.gate(from)
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	if !p.track(in, out) {
		_ = in.Close()
		_ = out.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.gate(from)
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done // one side ended: end both
	_ = in.Close()
	_ = out.Close()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// track records a forwarded pair, unless the link is cut.
func (p *Proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	return true
}
