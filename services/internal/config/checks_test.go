package config

import (
	"strings"
	"testing"
)

// A server URL that does not parse says what is wrong, with its password (or token) masked.
func TestServerURLsSayWhatIsWrongWithoutThePassword(t *testing.T) {
	encode := "it does not parse (a password or token holding '/', '?', '#', '@' or '%' must be percent-encoded)"
	for raw, want := range map[string]string{
		"nats://host:notaport":                  `"nats://host:notaport" is not a URL: invalid port ":notaport" after host`,
		"nats://ho st:4222":                     `"nats://ho st:4222" is not a URL: invalid character " " in host name`,
		"nats://u:s3cret@host:notaport":         `"nats://xxxxx@host:notaport" is not a URL: invalid port ":notaport" after host`,
		"nats://a:4222,tls://u:s3cret@b:x/path": `"tls://xxxxx@b:x/path" is not a URL: invalid port ":x" after host`,
		// A base64 password written unencoded: net/url reads "s3" as a port, and says so.
		"nats://u:s3/cr+et==@host:4222": `"nats://xxxxx@host:4222" is not a URL: ` + encode,
		"ftp://u:s3cret@host:21":        `"ftp://u:xxxxx@host:21": scheme must be one of nats, tls, ws, wss`,
	} {
		err := NATSURLs(raw)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", raw, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "cr+et")) {
			t.Errorf("%s: the error holds the password", raw)
		}
	}
}

// A URL that parses, but only because a password holding '/' ended its authority early, is
// masked by hand: everything before the last '@'.
func TestRedactURLsMasksAPasswordHoldingASlash(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:12/ab@host:4222":             "nats://xxxxx@host:4222",
		"nats://u:pw@a:4222,nats://tok@b:4222": "nats://u:xxxxx@a:4222,nats://xxxxx@b:4222",
		"nats://a:4222":                        "nats://a:4222",
	} {
		if got := RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
}
