package testenv

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo is a server that sends each line back.
func echo(t *testing.T) string {
	return ServeTCP(t, func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	})
}

// dialFrom connects to addr from a loopback address of its own.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// answers says whether a line sent on c comes back within wait.
func answers(t *testing.T, c net.Conn, wait time.Duration) bool {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	line, err := bufio.NewReader(c).ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	if err != nil || line != "ping\n" {
		t.Fatalf("read %q: %v", line, err)
	}
	return true
}

// A link frozen from one address holds that address's connections, open and new, and no
// other's, until Thaw; then what waited goes through.
func TestFreezeFromHoldsOnlyThatAddress(t *testing.T) {
	p := StartProxy(t, echo(t))
	apart, other := dialFrom(t, "127.0.0.2", p.Addr()), dialFrom(t, "127.0.0.3", p.Addr())
	if !answers(t, apart, 5*time.Second) || !answers(t, other, 5*time.Second) {
		t.Fatal("no answer before the freeze")
	}
	p.FreezeFrom("127.0.0.2")
	later := dialFrom(t, "127.0.0.2", p.Addr())
	// A wait on something that must not come: 300 ms is far more than a loopback echo takes.
	if answers(t, apart, 300*time.Millisecond) || answers(t, later, 300*time.Millisecond) {
		t.Fatal("a connection from the frozen address was answered")
	}
	if !answers(t, other, 5*time.Second) || !answers(t, dialFrom(t, "127.0.0.1", p.Addr()), 5*time.Second) {
		t.Fatal("a connection from another address was held")
	}
	p.Thaw()
	for _, c := range []net.Conn{apart, later} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("after Thaw, what waited: %q, %v", line, err)
		}
	}
}
