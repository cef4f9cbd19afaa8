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
			parts[i] = "(unparsable URL)"
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
