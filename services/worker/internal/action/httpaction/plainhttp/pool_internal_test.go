package plainhttp

import (
	"net"
	"testing"
	"time"
)

// pipeConn is a connection that says whether it was closed.
func pipeConn(t *testing.T) (*conn, func() bool) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return &conn{nc: a}, func() bool {
		_ = a.SetReadDeadline(time.Now())
		_, err := a.Read(make([]byte, 1))
		return err != nil && !isTimeout(err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestThePoolKeepsWhatItsBoundsAllowForTheirTime(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPool(2, 3, time.Minute, func() time.Time { return now })
	defer p.closeAll()
	var closed []func() bool
	for i := range 4 {
		c, isClosed := pipeConn(t)
		closed = append(closed, isClosed)
		addr := "a:80"
		if i == 3 {
			addr = "b:80"
		}
		p.put(addr, c)
		now = now.Add(10 * time.Second)
	}
	// a:80 keeps 2 (the third closed), b:80 its one.
	if !closed[2]() || closed[0]() || closed[1]() || closed[3]() {
		t.Fatalf("closed: %v %v %v %v, want only the third (a:80 keeps two)", closed[0](), closed[1](), closed[2](), closed[3]())
	}
	// At 65 s the first (put at 0 s) is past the minute; the second (10 s) and b's (30 s) not.
	now = time.Unix(1065, 0)
	p.closeIdle(now.Add(-time.Minute))
	if !closed[0]() || closed[1]() || closed[3]() {
		t.Fatal("closeIdle closed the wrong connections")
	}
	if c := p.get("a:80"); c == nil || p.get("a:80") != nil || p.get("b:80") == nil || p.count != 0 {
		t.Fatal("the pool does not hold a:80's second and b:80's connection alone")
	}
}
