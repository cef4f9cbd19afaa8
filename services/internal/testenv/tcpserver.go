package testenv

import (
	"net"
	"testing"
)

// ServeTCP listens on a free loopback port until the test ends and runs handle on each
// connection in a goroutine of its own; it returns the address. The connection is handle's to
// close.
func ServeTCP(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}
