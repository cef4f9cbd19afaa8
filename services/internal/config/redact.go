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
// space in the host): whatever stands between the scheme and the last '@' of the authority.
func redactUnparsable(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(unparsable URL)"
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	return scheme + "://" + rest
}
