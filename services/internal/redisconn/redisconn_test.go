package redisconn

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestURLForms(t *testing.T) {
	for _, c := range []struct {
		url, kind string
		check     func(t *testing.T, c redis.UniversalClient)
	}{
		{"redis://127.0.0.1:6379/2", "server", func(t *testing.T, c redis.UniversalClient) {
			if o := c.(*redis.Client).Options(); o.DB != 2 || o.Addr != "127.0.0.1:6379" || o.TLSConfig != nil {
				t.Errorf("options %+v", o)
			}
		}},
		{"rediss://alice:pw@r.example:6380/0", "server", func(t *testing.T, c redis.UniversalClient) {
			if o := c.(*redis.Client).Options(); o.Username != "alice" || o.Password != "pw" || o.TLSConfig == nil || o.TLSConfig.ServerName != "r.example" {
				t.Errorf("options %+v", o)
			}
		}},
		{"redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7000/", "cluster", func(t *testing.T, c redis.UniversalClient) {
			if o := c.(*redis.ClusterClient).Options(); len(o.Addrs) != 2 || o.Username != "u" || o.Password != "p" {
				t.Errorf("options %+v", o)
			}
		}},
		{"redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster/3?sentinel_password=sp", "sentinel", func(t *testing.T, c redis.UniversalClient) {
			if _, ok := c.(*redis.Client); !ok {
				t.Errorf("a failover client is a *redis.Client, got %T", c)
			}
		}},
	} {
		tp, err := parse(c.url)
		if err != nil || tp.kind != c.kind {
			t.Errorf("%s: %v %v", c.url, tp.kind, err)
			continue
		}
		cl, err := Options{URL: c.url}.Client("test", nil)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		c.check(t, cl)
		_ = cl.Close()
		if fails := (Options{URL: c.url}).FailsOver(); fails != (c.kind != "server") {
			t.Errorf("%s: FailsOver %v", c.url, fails)
		}
	}
	for url, want := range map[string]string{
		"http://x:1":                          "scheme must be redis or rediss",
		"redis://a:1,b:2/0":                   "use redis+cluster://",
		"redis+ring://a:1/":                   "unknown topology",
		"redis+cluster://a:1/3":               "one database",
		"redis+sentinel://a:1,b:2/":           "name the master",
		"redis+sentinel://a:1/m/x":            "the database must be a number",
		"redis+cluster://a/":                  "host:port",
		"redis+cluster://alice:s3cret@a,b:1/": "host:port",
		// net/url and go-redis quote the URL, and pieces of it that are pieces of a password
		// holding '/' written unencoded: their reason is kept unless it holds one.
		"redis://:s3cret@host:bad":     "invalid port",
		"rediss://alice:s3cret@[::1/0": "missing ']' in host",
		"redis://alice:s3cret@h:1/x":   "invalid database number",
		"redis://:s3cr/et+==@h:1/0":    "must be percent-encoded",
		"redis://u:12/s3cret@h:1/0":    "must be percent-encoded",
	} {
		_, err := parse(url)
		if err == nil || !strings.Contains(err.Error(), want) || (strings.Contains(err.Error(), "s3cr") || strings.Contains(err.Error(), "et+")) {
			t.Errorf("%s: %v, want an error with %q and no password", url, err, want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:secret@h:1/0":               "redis://:xxxxx@h:1/0",
		"rediss://alice:secret@h:1/0":         "rediss://alice:xxxxx@h:1/0",
		"redis+cluster://u:secret@a:1,b:2/":   "redis+cluster://u:xxxxx@a:1,b:2/",
		"redis+sentinel://a:1,b:2/m/0":        "redis+sentinel://a:1,b:2/m/0",
		"redis+sentinel://secret@a:1,b:2/m/0": "redis+sentinel://xxxxx@a:1,b:2/m/0",
		// A base64 password written unencoded, a sentinel password in the query.
		"redis://:ab/cd+ef==@h:1/0":                                        "redis://:xxxxx@h:1/0",
		"redis://u:a?b#c@h:1/0":                                            "redis://u:xxxxx@h:1/0",
		"redis+sentinel://a:1/m/0?sentinel_password=secret":                "redis+sentinel://a:1/m/0?sentinel_password=xxxxx",
		"redis+sentinel://u:pw@a:1/m/0?db=1&sentinel_password=se@cret&x=1": "redis+sentinel://u:xxxxx@a:1/m/0?db=1&sentinel_password=xxxxx&x=1",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
