package httpaction

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
)

// DefaultDenyNetworks is the deny list of Options.DenyNetworks when none is given: the cloud
// metadata services, whose answers (an instance's credentials) a job's history would show to
// whoever may read it.
const DefaultDenyNetworks = "metadata"

// networkNames are the sets a deny list may name.
var networkNames = map[string][]string{
	// Link-local (AWS, Azure, GCP and Oracle metadata at 169.254.169.254), AWS's IPv6
	// metadata, Azure's wire server and Alibaba's metadata.
	"metadata": {"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "168.63.129.16/32", "100.100.100.200/32"},
	"loopback": {"127.0.0.0/8", "::1/128"},
	// RFC 1918, shared address space (RFC 6598) and IPv6 unique local addresses.
	"private": {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"},
}

// ParseNetworks reads a deny list: comma-separated networks (10.0.0.0/8, fd00::/8), single
// addresses, and the names metadata, loopback and private; "none" is the empty list.
func ParseNetworks(list string) ([]netip.Prefix, error) {
	out := []netip.Prefix{} // not nil: Options reads nil as the default
	none := false
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			continue
		case strings.EqualFold(item, "none"):
			none = true
		case networkNames[strings.ToLower(item)] != nil:
			for _, n := range networkNames[strings.ToLower(item)] {
				out = append(out, netip.MustParsePrefix(n))
			}
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not a network such as 10.0.0.0/8: %w", item, err)
			}
			out = append(out, p.Masked())
		default:
			a, err := netip.ParseAddr(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address, a network such as 10.0.0.0/8, or one of metadata, loopback, private and none", item)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	if len(out) == 0 && !none { // a list of commas is more likely a mistake than a choice
		return nil, fmt.Errorf("%q names no network: write none to deny nothing", list)
	}
	return out, nil
}

// DeniedError is the failure of a connection to a denied address.
type DeniedError struct {
	Addr    netip.Addr
	Network netip.Prefix // invalid for an unspecified address
}

func (e *DeniedError) Error() string {
	if !e.Network.IsValid() {
		return fmt.Sprintf("address %s is not one a worker calls", e.Addr)
	}
	return fmt.Sprintf("address %s is in %s, a network this worker may not call (RESCHED_WORKER_DENY_NETWORKS)", e.Addr, e.Network)
}

// guard refuses connections to denied addresses. It is the dialer's Control, so it sees the
// address actually dialled: a name that resolves (or is made to resolve) to a denied address
// is refused as the address written in the URI is, and each redirect's host is checked too.
type guard struct{ deny []netip.Prefix }

func (g guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dialling %q: %w", address, err)
	}
	// Prefix.Contains matches neither a zoned address nor an IPv4 one written as IPv6.
	ip := ap.Addr().WithZone("").Unmap()
	if ip.IsUnspecified() { // 0.0.0.0 and :: reach this host
		return &DeniedError{Addr: ip}
	}
	for _, n := range g.deny {
		if n.Contains(ip) {
			return &DeniedError{Addr: ip, Network: n}
		}
	}
	return nil
}

// denied reports whether err is a refused connection.
func denied(err error) bool {
	var d *DeniedError
	return errors.As(err, &d)
}
