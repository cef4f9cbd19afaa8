//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package plainhttp

import "net"

// staleCheckable: no look at a socket here, so every request goes to the fallback.
const staleCheckable = false

func stale(net.Conn) bool { return true }
