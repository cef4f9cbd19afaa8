package config

import (
	"strings"
	"testing"
)

// A server URL that does not parse says what is wrong, with its password (or token) masked.
func TestServerURLsSayWhatIsWrongWithoutThePassword(t *testing.T) {
	for raw, want := range map[string]string{
		"nats://u:s3cret@host:notaport":         `"nats://xxxxx@host:notaport" is not a URL: invalid port ":notaport" after host`,
		"nats://s3cret@ho st:4222":              `"nats://xxxxx@ho st:4222" is not a URL: invalid character " " in host name`,
		"nats://a:4222,tls://u:s3cret@b:x/path": `"tls://xxxxx@b:x/path" is not a URL: invalid port ":x" after host`,
		"ftp://u:s3cret@host:21":                `"ftp://u:xxxxx@host:21": scheme must be one of nats, tls, ws, wss`,
	} {
		err := NATSURLs(raw)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error holds the password", raw)
		}
	}
}
