package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// NATSURLs accepts a comma-separated list of NATS server URLs.
func NATSURLs(v string) error { return ServerURLs(v, "nats", "tls", "ws", "wss") }

// ServerURLs accepts a comma-separated list of URLs with one of the schemes and a host.
func ServerURLs(list string, schemes ...string) error {
	for _, raw := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("%q is not a URL: %w", RedactURLs(raw), URLReason(strings.TrimSpace(raw), err))
		}
		if !slices.Contains(schemes, u.Scheme) {
			return fmt.Errorf("%q: scheme must be one of %s", u.Redacted(), strings.Join(schemes, ", "))
		}
		if u.Hostname() == "" {
			return fmt.Errorf("%q has no host", u.Redacted())
		}
	}
	return nil
}

// SubjectPrefix accepts one or more NATS subject tokens without wildcards or spaces.
func SubjectPrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("%q has an empty token", p)
		}
		if strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("%q may not hold wildcards or white space", p)
		}
	}
	return nil
}

// ListenAddr accepts host:port or :port with a numeric port (0 picks a free one).
func ListenAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port or :port", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port must be a number from 0 to 65535", a)
	}
	return nil
}
