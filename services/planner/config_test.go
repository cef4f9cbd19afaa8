package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/planner/internal/store"
)

// env returns a getenv func over a fixed map, so tests never touch the process environment.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestParseConfig(t *testing.T) {
	def := defaultConfig()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want Config
	}{
		{name: "defaults", want: def},
		{
			name: "environment",
			env: map[string]string{
				"RESCHED_PLANNER_LOG_LEVEL":      "debug",
				"NATS_URL":                       "nats://n1:4222,nats://n2:4222",
				"REDIS_URL":                      "rediss://:pw@redis.example:6380/2",
				"RESCHED_PLANNER_SUBJECT_PREFIX": "acme.scheduler",
			},
			want: with(def, func(c *Config) {
				c.LogLevel = slog.LevelDebug
				c.NATS.URL = "nats://n1:4222,nats://n2:4222"
				c.Redis.URL = "rediss://:pw@redis.example:6380/2"
				c.SubjectPrefix = "acme.scheduler"
			}),
		},
		{
			name: "every planner variable",
			env: map[string]string{
				"RESCHED_PLANNER_HTTP_ADDR":          "127.0.0.1:9090",
				"RESCHED_PLANNER_REDIS_KEY_PREFIX":   "acme",
				"RESCHED_PLANNER_CATCH_UP_WINDOW":    "90m",
				"RESCHED_PLANNER_LEASE":              "1m",
				"RESCHED_PLANNER_BATCH":              "1000",
				"RESCHED_PLANNER_CONCURRENCY":        "16",
				"RESCHED_PLANNER_MAX_IDLE":           "200ms",
				"RESCHED_PLANNER_STREAM_REPLICAS":    "3",
				"RESCHED_PLANNER_DUPLICATE_WINDOW":   "2h",
				"RESCHED_PLANNER_MIN_RETRY_INTERVAL": "5s",
				"RESCHED_PLANNER_SHUTDOWN_TIMEOUT":   "45s",
				"RESCHED_PLANNER_MIN_REPLICAS":       "1",
				"RESCHED_PLANNER_REPLICA_WAIT":       "250ms",
			},
			want: with(def, func(c *Config) {
				c.HTTPAddr = "127.0.0.1:9090"
				c.RedisKeyPrefix = "acme"
				c.CatchUpWindow = 90 * time.Minute
				c.Lease = time.Minute
				c.Batch = 1000
				c.Concurrency = 16
				c.MaxIdle = 200 * time.Millisecond
				c.StreamReplicas = 3
				c.DuplicateWindow = 2 * time.Hour
				c.MinRetryInterval = 5 * time.Second
				c.ShutdownTimeout = 45 * time.Second
				c.MinReplicas = 1
				c.ReplicaWait = 250 * time.Millisecond
			}),
		},
		{
			name: "every planner flag",
			args: []string{"-http-addr", ":0", "-redis-key-prefix", "f", "-catch-up-window", "2h", "-lease", "10s",
				"-batch", "1", "-concurrency", "1", "-max-idle", "1ms", "-stream-replicas", "5",
				"-duplicate-window", "1s", "-min-retry-interval", "1s", "-shutdown-timeout", "1s", "-lookahead", "2s", "-wake-linger", "0"},
			env: map[string]string{"RESCHED_PLANNER_BATCH": "7", "RESCHED_PLANNER_LEASE": "1m"},
			want: with(def, func(c *Config) {
				c.HTTPAddr = ":0"
				c.RedisKeyPrefix = "f"
				c.CatchUpWindow = 2 * time.Hour
				c.Lease = 10 * time.Second
				c.Batch = 1
				c.Concurrency = 1
				c.MaxIdle = time.Millisecond
				c.StreamReplicas = 5
				c.DuplicateWindow = time.Second
				c.MinRetryInterval = time.Second
				c.ShutdownTimeout = time.Second
				c.Lookahead = 2 * time.Second
				c.WakeLinger = 0
			}),
		},
		{
			name: "flags override environment",
			args: []string{"-log-level", "WARN", "-nats-url", "tls://flag:4222", "-redis-url", "redis://flag:6379", "-subject-prefix", "flag"},
			env: map[string]string{
				"RESCHED_PLANNER_LOG_LEVEL":      "debug",
				"NATS_URL":                       "nats://env:4222",
				"REDIS_URL":                      "redis://env:6379",
				"RESCHED_PLANNER_SUBJECT_PREFIX": "env",
			},
			want: with(def, func(c *Config) {
				c.LogLevel, c.NATS.URL, c.Redis.URL, c.SubjectPrefix = slog.LevelWarn, "tls://flag:4222", "redis://flag:6379", "flag"
			}),
		},
		{
			name: "empty variables count as unset",
			env:  map[string]string{"NATS_URL": "", "RESCHED_PLANNER_LOG_LEVEL": "  "},
			want: def,
		},
		{
			name: "unprefixed planner variables are ignored",
			env:  map[string]string{"LOG_LEVEL": "debug", "RESCHED_WORKER_LOG_LEVEL": "debug"},
			want: def,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(tt.args, env(tt.env), io.Discard)
			if err != nil {
				t.Fatalf("parseConfig: %v", err)
			}
			if got != tt.want {
				t.Errorf("parseConfig = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // each must appear in the error
	}{
		{name: "log level", env: map[string]string{"RESCHED_PLANNER_LOG_LEVEL": "loud"}, want: []string{"RESCHED_PLANNER_LOG_LEVEL", "-log-level", `"loud"`}},
		{name: "NATS scheme", args: []string{"-nats-url", "http://x:4222"}, want: []string{"NATS_URL", "-nats-url", "scheme"}},
		{name: "NATS host", env: map[string]string{"NATS_URL": "nats://a:4222,nats://"}, want: []string{"NATS_URL", "no host"}},
		{name: "Redis scheme", env: map[string]string{"REDIS_URL": "localhost:6379"}, want: []string{"REDIS_URL", "-redis-url"}},
		{name: "Redis list", env: map[string]string{"REDIS_URL": "redis://a,redis://b"}, want: []string{"REDIS_URL", "one server only", "redis+cluster://"}},
		{name: "Redis TLS files without rediss", env: map[string]string{"REDIS_CA": "config_test.go"}, want: []string{"-redis-ca", "rediss"}},
		{name: "NATS user without password", env: map[string]string{"NATS_USER": "alice"}, want: []string{"NATS_USER", "needs a password"}},
		{name: "NATS creds and nkey", env: map[string]string{"NATS_CREDS": "config_test.go", "NATS_NKEY": "config_test.go"}, want: []string{"NATS_CREDS", "exclude each other"}},
		{name: "NATS CA missing", env: map[string]string{"NATS_CA": "/nowhere/ca.pem"}, want: []string{"NATS_CA", "cannot read /nowhere/ca.pem"}},
		{name: "subject wildcard", args: []string{"-subject-prefix", "a.*"}, want: []string{"RESCHED_PLANNER_SUBJECT_PREFIX", "wildcards"}},
		{name: "subject empty token", args: []string{"-subject-prefix", "a."}, want: []string{"-subject-prefix", "empty token"}},
		{name: "Redis database", env: map[string]string{"REDIS_URL": "redis://:hunter2@h:6379/x"}, want: []string{"REDIS_URL", "database", "xxxxx"}},
		{name: "HTTP address", env: map[string]string{"RESCHED_PLANNER_HTTP_ADDR": "8081"}, want: []string{"RESCHED_PLANNER_HTTP_ADDR", "-http-addr", "host:port"}},
		{name: "HTTP port", args: []string{"-http-addr", ":99999"}, want: []string{"RESCHED_PLANNER_HTTP_ADDR", "port"}},
		{name: "key prefix braces", args: []string{"-redis-key-prefix", "a{b}"}, want: []string{"RESCHED_PLANNER_REDIS_KEY_PREFIX", "braces"}},
		{name: "empty flag", args: []string{"-redis-key-prefix", ""}, want: []string{"-redis-key-prefix", "empty"}},
		{name: "duration syntax", env: map[string]string{"RESCHED_PLANNER_LEASE": "30"}, want: []string{"RESCHED_PLANNER_LEASE", "-lease", `"30" is not a duration`}},
		{name: "duration minimum", args: []string{"-max-idle", "100us"}, want: []string{"RESCHED_PLANNER_MAX_IDLE", "-max-idle", "minimum of 1ms"}},
		{name: "negative duration", args: []string{"-shutdown-timeout", "-5s"}, want: []string{"RESCHED_PLANNER_SHUTDOWN_TIMEOUT", "minimum of 1s"}},
		{name: "catch-up window", args: []string{"-catch-up-window", "0s"}, want: []string{"RESCHED_PLANNER_CATCH_UP_WINDOW", "-catch-up-window"}},
		{name: "duplicate window", env: map[string]string{"RESCHED_PLANNER_DUPLICATE_WINDOW": "ten minutes"}, want: []string{"RESCHED_PLANNER_DUPLICATE_WINDOW", "-duplicate-window"}},
		{name: "min retry interval", env: map[string]string{"RESCHED_PLANNER_MIN_RETRY_INTERVAL": "1d"}, want: []string{"RESCHED_PLANNER_MIN_RETRY_INTERVAL", "-min-retry-interval"}},
		{name: "whole number", env: map[string]string{"RESCHED_PLANNER_BATCH": "1e3"}, want: []string{"RESCHED_PLANNER_BATCH", "-batch", "whole number"}},
		{name: "batch range", args: []string{"-batch", "0"}, want: []string{"-batch", "between 1 and 10000"}},
		{name: "concurrency too high", args: []string{"-concurrency", "1025"}, want: []string{"RESCHED_PLANNER_CONCURRENCY", "between 1 and 1024"}},
		{name: "catch-up policy", env: map[string]string{"RESCHED_PLANNER_CATCH_UP_POLICY": "some"}, want: []string{"RESCHED_PLANNER_CATCH_UP_POLICY", "-catch-up-policy", "latest or all"}},
		{name: "partitions", args: []string{"-partitions", "0"}, want: []string{"RESCHED_PLANNER_PARTITIONS", "between 1 and 1024"}},
		{name: "replicas", env: map[string]string{"RESCHED_PLANNER_STREAM_REPLICAS": "7"}, want: []string{"RESCHED_PLANNER_STREAM_REPLICAS", "-stream-replicas", "between 1 and 5"}},
		{name: "replica wait past the read time-out", env: map[string]string{"RESCHED_PLANNER_REPLICA_WAIT": "5s"}, want: []string{"RESCHED_PLANNER_REPLICA_WAIT", "-replica-wait", "more than 2s"}},
		{name: "lookahead past the lease", args: []string{"-lookahead", "30s"}, want: []string{"RESCHED_PLANNER_LOOKAHEAD", "-lookahead", "shorter than the lease"}},
		{name: "re-encrypt without keys", args: []string{"-reencrypt"}, want: []string{"-reencrypt", "no secret keys", "RESCHED_SECRET_KEYS_FILE"}},
		{name: "re-encrypt and repartition", env: map[string]string{"RESCHED_SECRET_KEYS": "k1=" + testKey}, args: []string{"-reencrypt", "-repartition"}, want: []string{"-reencrypt", "-repartition", "one at a time"}},
		{name: "secret key too short", env: map[string]string{"RESCHED_SECRET_KEYS": "k1=c2hvcnQ="}, want: []string{"RESCHED_SECRET_KEYS", `key "k1"`, "32 random bytes"}},
		{name: "secret keys twice", env: map[string]string{"RESCHED_SECRET_KEYS": "k1=" + testKey, "RESCHED_SECRET_KEYS_FILE": "config_test.go"}, want: []string{"RESCHED_SECRET_KEYS_FILE"}},
		{name: "unknown flag", args: []string{"-bogus"}, want: []string{"bogus"}},
		{name: "positional argument", args: []string{"extra"}, want: []string{`"extra"`}},
		{
			name: "every bad field is named",
			env:  map[string]string{"RESCHED_PLANNER_LOG_LEVEL": "x", "NATS_URL": "x://y"},
			want: []string{"RESCHED_PLANNER_LOG_LEVEL", "NATS_URL"},
		},
		{
			name: "passwords stay out of errors",
			env:  map[string]string{"REDIS_URL": "http://:hunter2@h"},
			want: []string{"REDIS_URL", "xxxxx"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, env(tt.env), io.Discard)
			if err == nil {
				t.Fatal("parseConfig succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q leaks a password", err)
			}
		})
	}
}

// testKey is a 32-byte key in base64.
const testKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// A bool flag stands alone, as Go's own do; the keys are read once, at parse.
func TestReencryptFlagAndKeys(t *testing.T) {
	for _, args := range [][]string{{"-reencrypt"}, {"-reencrypt=true"}, {"--reencrypt", "-log-level", "warn"}} {
		cfg, err := parseConfig(args, env(map[string]string{"RESCHED_SECRET_KEYS": "new=" + testKey + ",old=" + testKey}), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !cfg.Reencrypt || cfg.keys.Newest() != "new" || len(cfg.keys.IDs()) != 2 {
			t.Errorf("%v: reencrypt %v, keys %v", args, cfg.Reencrypt, cfg.keys.IDs())
		}
	}
}

func TestParseConfigHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"-h"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"RESCHED_PLANNER_LOG_LEVEL", "NATS_URL", "REDIS_URL", "RESCHED_PLANNER_SUBJECT_PREFIX",
		"RESCHED_PLANNER_HTTP_ADDR", "RESCHED_PLANNER_REDIS_KEY_PREFIX", "RESCHED_PLANNER_CATCH_UP_WINDOW",
		"RESCHED_PLANNER_LEASE", "RESCHED_PLANNER_BATCH", "RESCHED_PLANNER_CONCURRENCY", "RESCHED_PLANNER_MAX_IDLE",
		"RESCHED_PLANNER_STREAM_REPLICAS", "RESCHED_PLANNER_DUPLICATE_WINDOW", "RESCHED_PLANNER_MIN_RETRY_INTERVAL",
		"RESCHED_PLANNER_SHUTDOWN_TIMEOUT"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("usage does not mention %s:\n%s", name, out.String())
		}
	}
	for _, def := range []string{`(default ":8081")`, `(default "1h")`, `(default "3s")`, `(default "256")`, `(default "10m")`, `(default "1s")`, `(default "latest")`} {
		if !strings.Contains(out.String(), def) {
			t.Errorf("usage does not show %s:\n%s", def, out.String())
		}
	}
}

// The usage shows the built-in defaults, never values (and passwords) from the environment.
func TestParseConfigHelpHidesTheEnvironment(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"-h"}, env(map[string]string{"REDIS_URL": "redis://:hunter2@r:6379/0"}), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Errorf("usage leaks the Redis password:\n%s", out.String())
	}
}

// with returns a copy of c changed by f.
func with(c Config, f func(*Config)) Config {
	f(&c)
	return c
}

func TestConfigLogValueHidesSecrets(t *testing.T) {
	cfg := defaultConfig()
	cfg.NATS.URL = "nats://s3cr3tt0ken@n1:4222,nats://user:pa55@n2:4222"
	cfg.Redis.URL = "redis://default:hunter2@redis:6379/0"
	got := cfg.LogValue().String()
	for _, secret := range []string{"s3cr3tt0ken", "pa55", "hunter2"} {
		if strings.Contains(got, secret) {
			t.Errorf("logged config %s leaks %q", got, secret)
		}
	}
	for _, kept := range []string{"n1:4222", "user:xxxxx@n2", "default:xxxxx@redis", "lease=3s", "catch_up_window=1h", "catch_up_policy=Latest", "batch=256"} {
		if !strings.Contains(got, kept) {
			t.Errorf("logged config %s lacks %q", got, kept)
		}
	}
}

// RESCHED_PLANNER_MIN_REPLICAS is auto unless set: a number, auto, or an error naming both.
func TestMinReplicasTakesANumberOrAuto(t *testing.T) {
	for _, tc := range []struct {
		set   string
		want  int
		store int
	}{{"", config.Auto, store.AutoReplicas}, {"auto", config.Auto, store.AutoReplicas}, {"0", 0, 0}, {"2", 2, 2}} {
		vars := map[string]string{}
		if tc.set != "" {
			vars["RESCHED_PLANNER_MIN_REPLICAS"] = tc.set
		}
		cfg, err := parseConfig(nil, env(vars), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.set, err)
		}
		if cfg.MinReplicas != tc.want || cfg.minReplicas() != tc.store {
			t.Errorf("%q: MinReplicas %d (the store's %d), want %d (%d)", tc.set, cfg.MinReplicas, cfg.minReplicas(), tc.want, tc.store)
		}
	}
	_, err := parseConfig(nil, env(map[string]string{"RESCHED_PLANNER_MIN_REPLICAS": "some"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "RESCHED_PLANNER_MIN_REPLICAS") || !strings.Contains(err.Error(), "nor auto") {
		t.Errorf("MIN_REPLICAS=some: %v, want an error naming the variable and auto", err)
	}
}

// A planner says at start what its settings leave unsafe: secrets in clear without keys, and
// results a failover can lose on a Redis that fails over while no write waits for a replica.
func TestWarnings(t *testing.T) {
	const cluster, sentinel = "redis+cluster://r1:7000,r2:7000/", "redis+sentinel://s1:26379/mymaster/0"
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // a word of each warning, in order
	}{
		{"defaults", nil, []string{"no secret keys"}},
		{"keys", map[string]string{"RESCHED_SECRET_KEYS": "k=" + testKey}, nil},
		{"cluster", map[string]string{"RESCHED_SECRET_KEYS": "k=" + testKey, "REDIS_URL": cluster}, nil},
		{"cluster not waiting", map[string]string{"RESCHED_SECRET_KEYS": "k=" + testKey, "REDIS_URL": cluster, "RESCHED_PLANNER_MIN_REPLICAS": "0"}, []string{"RESCHED_PLANNER_MIN_REPLICAS=auto"}},
		{"sentinel not waiting", map[string]string{"REDIS_URL": sentinel, "RESCHED_PLANNER_MIN_REPLICAS": "0"}, []string{"no secret keys", "RESCHED_PLANNER_MIN_REPLICAS=auto"}},
		{"one server not waiting", map[string]string{"RESCHED_SECRET_KEYS": "k=" + testKey, "RESCHED_PLANNER_MIN_REPLICAS": "0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(nil, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.warnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: %q, want it to name %q", i, got[i], w)
				}
			}
		})
	}
}
