package config

import (
	"net/url"
	"strings"
)

// RedactURLs masks the password (or a lone user token, as NATS uses) of each URL in a list.
func RedactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, raw := range parts {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			parts[i] = redactUnparsable(strings.TrimSpace(raw))
			continue
		}
		if u.User == nil && strings.Contains(raw, "@") {
			// An '@' net/url did not take for the end of a user part (a password holding '/'
			// ends the authority early): mask by hand.
			parts[i] = redactUnparsable(strings.TrimSpace(raw))
			continue
		}
		if u.User != nil {
			if _, hasPassword := u.User.Password(); !hasPassword {
				u.User = url.User("xxxxx") // nats://TOKEN@host: the user part is the secret
			}
		}
		parts[i] = u.Redacted()
	}
	return strings.Join(parts, ",")
}

// redactUnparsable masks the user and password of a URL net/url does not parse (a bad port, a
// space in the host, a password holding '/'): whatever stands between the scheme and the last
// '@'.
func redactUnparsable(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(unparsable URL)"
	}
	// The user part ends at the last '@': a password may hold '/' or '?' (NATS URLs have no
	// path or query that would hold an '@').
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	return scheme + "://" + rest
}
