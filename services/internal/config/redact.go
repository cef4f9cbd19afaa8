package config

import (
	"errors"
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

// URLReason is what may be said of why a URL with credentials does not parse. net/url's errors
// quote the whole URL, and their reasons (and go-redis's) quote pieces of it, a port or a
// database, that are pieces of the password when it holds '/' or '?' unencoded. The reason is
// kept unless it holds a piece of the user part; then it says only how to write the password.
func URLReason(raw string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return err
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return err
	}
	separator := func(r rune) bool { return strings.ContainsRune(":/?#", r) }
	for _, piece := range strings.FieldsFunc(rest[:at], separator) {
		if strings.Contains(err.Error(), piece) {
			return errors.New("it does not parse (a password or token holding '/', '?', '#', '@' or '%' must be percent-encoded)")
		}
	}
	return err
}
