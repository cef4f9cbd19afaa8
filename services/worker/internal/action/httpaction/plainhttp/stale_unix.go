//go:build linux || darwin || freebsd || netbsd || openbsd

package plainhttp

import (
	"errors"
	"net"
	"syscall"
)

// staleCheckable: stale can look at a socket here.
const staleCheckable = true

// stale reports whether an idle connection can no longer carry a request: the target closed
// it (end of stream), reset it, or sent bytes nobody asked for. It peeks at the socket without
// waiting or reading, so a live connection is left as it was.
func stale(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var (
		buf  [1]byte
		rerr error
	)
	err = raw.Read(func(fd uintptr) bool {
		_, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // one look, never a wait
	})
	if err != nil {
		return true
	}
	if errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) {
		return false // open, nothing to read: as an idle connection should be
	}
	return true // read 0 bytes: closed; more: unasked bytes; or an error
}
