package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// env returns a getenv func over a fixed map, so tests never touch the process environment.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func with(c Config, edit func(*Config)) Config {
	edit(&c)
	return c
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
			name: "every variable",
			env: map[string]string{
				"RESCHED_WORKER_LOG_LEVEL":              "error",
				"NATS_URL":                              "nats://n1:4222, nats://n2:4222",
				"RESCHED_WORKER_SUBJECT_PREFIX":         "acme.scheduler",
				"RESCHED_WORKER_HTTP_ADDR":              "127.0.0.1:9090",
				"RESCHED_WORKER_REGION":                 "West Europe",
				"RESCHED_WORKER_CONCURRENCY":            "64",
				"RESCHED_WORKER_ACK_WAIT":               "2m",
				"RESCHED_WORKER_MAX_ACK_PENDING":        "50000",
				"RESCHED_WORKER_HTTP_TIMEOUT":           "30s",
				"RESCHED_WORKER_MIN_RETRY_INTERVAL":     "1m",
				"RESCHED_WORKER_SHUTDOWN_TIMEOUT":       "45s",
				"RESCHED_WORKER_STREAM_REPLICAS":        "3",
				"RESCHED_WORKER_OAUTH_AUTHORITY":        "https://login.microsoftonline.us",
				"RESCHED_WORKER_DENY_NETWORKS":          "metadata, private, 192.0.2.1",
				"RESCHED_WORKER_STORAGE_QUEUE_ENDPOINT": "http://127.0.0.1:10001/{account}",
				"RESCHED_WORKER_STORAGE_QUEUE_BASE64":   "true",
				"RESCHED_WORKER_SERVICEBUS_ENDPOINT":    "sb://127.0.0.1:5672",
				"RESCHED_WORKER_SERVICEBUS_EMULATOR":    "1",
				"RESCHED_WORKER_RESULT_LINGER":          "20ms",
				"RESCHED_WORKER_RESULT_MAX_WAIT":        "1s",
			},
			want: with(def, func(c *Config) {
				c.LogLevel = slog.LevelError
				c.NATS.URL = "nats://n1:4222, nats://n2:4222"
				c.SubjectPrefix = "acme.scheduler"
				c.HTTPAddr = "127.0.0.1:9090"
				c.Region = "West Europe"
				c.Concurrency = 64
				c.AckWait = 2 * time.Minute
				c.MaxAckPending = 50_000
				c.AttemptTimeout = 30 * time.Second
				c.MinRetryInterval = time.Minute
				c.ShutdownTimeout = 45 * time.Second
				c.StreamReplicas = 3
				c.OAuthAuthority = "https://login.microsoftonline.us"
				c.DenyNetworks = "metadata, private, 192.0.2.1"
				c.StorageQueueEndpoint = "http://127.0.0.1:10001/{account}"
				c.StorageQueueBase64 = true
				c.ServiceBusEndpoint = "sb://127.0.0.1:5672"
				c.ServiceBusEmulator = true
				c.ResultLinger = 20 * time.Millisecond
				c.ResultMaxWait = time.Second
			}),
		},
		{
			name: "flags override environment",
			args: []string{"-log-level=debug", "-nats-url=wss://flag:443", "-subject-prefix=flag", "-concurrency=1",
				"-ack-wait=4s", "-http-timeout=1s", "-min-retry-interval=10ms", "-http-addr=:0", "-servicebus-emulator=false"},
			env: map[string]string{
				"RESCHED_WORKER_LOG_LEVEL":           "error",
				"NATS_URL":                           "nats://env:4222",
				"RESCHED_WORKER_SUBJECT_PREFIX":      "env",
				"RESCHED_WORKER_CONCURRENCY":         "64",
				"RESCHED_WORKER_SERVICEBUS_EMULATOR": "true",
			},
			want: with(def, func(c *Config) {
				c.LogLevel = slog.LevelDebug
				c.NATS.URL = "wss://flag:443"
				c.SubjectPrefix = "flag"
				c.Concurrency = 1
				c.AckWait = 4 * time.Second
				c.AttemptTimeout = time.Second
				c.MinRetryInterval = 10 * time.Millisecond
				c.HTTPAddr = ":0"
			}),
		},
		{name: "upper bound", env: map[string]string{"RESCHED_WORKER_CONCURRENCY": "1024"}, want: with(def, func(c *Config) { c.Concurrency = 1024 })},
		{name: "collection concurrency", env: map[string]string{"RESCHED_WORKER_COLLECTION_CONCURRENCY": "8"}, want: with(def, func(c *Config) { c.CollectionLimit = 8 })},
		{name: "empty variables count as unset", env: map[string]string{"RESCHED_WORKER_CONCURRENCY": ""}, want: def},
		{name: "planner variables are ignored", env: map[string]string{"RESCHED_PLANNER_LOG_LEVEL": "debug", "REDIS_URL": "bogus"}, want: def},
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
		{name: "log level", args: []string{"-log-level", "chatty"}, want: []string{"RESCHED_WORKER_LOG_LEVEL", "-log-level", `"chatty"`}},
		{name: "NATS scheme", env: map[string]string{"NATS_URL": "redis://x"}, want: []string{"NATS_URL", "scheme"}},
		{name: "concurrency not a number", env: map[string]string{"RESCHED_WORKER_CONCURRENCY": "many"}, want: []string{"RESCHED_WORKER_CONCURRENCY", "-concurrency", `"many"`}},
		{name: "concurrency zero", args: []string{"-concurrency", "0"}, want: []string{"-concurrency", "between 1 and 1024"}},
		{name: "concurrency too high", args: []string{"-concurrency", "1025"}, want: []string{"-concurrency"}},
		{name: "collection concurrency negative", env: map[string]string{"RESCHED_WORKER_COLLECTION_CONCURRENCY": "-1"}, want: []string{"RESCHED_WORKER_COLLECTION_CONCURRENCY", "between 0 and 1024"}},
		{name: "subject prefix", env: map[string]string{"RESCHED_WORKER_SUBJECT_PREFIX": "a b"}, want: []string{"RESCHED_WORKER_SUBJECT_PREFIX"}},
		{name: "ack wait too short for heartbeats", env: map[string]string{"RESCHED_WORKER_ACK_WAIT": "2s"}, want: []string{"RESCHED_WORKER_ACK_WAIT", "-ack-wait", "minimum of 3s"}},
		{name: "result linger too long", env: map[string]string{"RESCHED_WORKER_RESULT_LINGER": "2s"}, want: []string{"RESCHED_WORKER_RESULT_LINGER", "-result-linger", "more than 1s"}},
		{name: "result max wait too long", args: []string{"-result-max-wait", "1500ms"}, want: []string{"RESCHED_WORKER_RESULT_MAX_WAIT", "-result-max-wait", "more than 1s"}},
		{name: "duration", args: []string{"-http-timeout", "soon"}, want: []string{"-http-timeout", `"soon"`}},
		{name: "listen address", args: []string{"-http-addr", "8082"}, want: []string{"-http-addr"}},
		{name: "authority", env: map[string]string{"RESCHED_WORKER_OAUTH_AUTHORITY": "ftp://login"}, want: []string{"RESCHED_WORKER_OAUTH_AUTHORITY", "scheme"}},
		{name: "deny networks", env: map[string]string{"RESCHED_WORKER_DENY_NETWORKS": "metadata,10.0.0.0/33"}, want: []string{"RESCHED_WORKER_DENY_NETWORKS", `"10.0.0.0/33" is not a network`}},
		{name: "target CA missing", env: map[string]string{"RESCHED_WORKER_TARGET_CA": "/nonexistent/ca.pem"}, want: []string{"RESCHED_WORKER_TARGET_CA", "-target-ca", "cannot read /nonexistent/ca.pem"}},
		{name: "target CA not PEM", env: map[string]string{"RESCHED_WORKER_TARGET_CA": "config_test.go"}, want: []string{"RESCHED_WORKER_TARGET_CA", "holds no PEM certificate"}},
		{name: "storage endpoint with a query", env: map[string]string{"RESCHED_WORKER_STORAGE_QUEUE_ENDPOINT": "https://{account}.q.example/?sv=1"}, want: []string{"STORAGE_QUEUE_ENDPOINT", "{account}.q.example", "without a query"}},
		{name: "service bus endpoint scheme", env: map[string]string{"RESCHED_WORKER_SERVICEBUS_ENDPOINT": "amqp://{namespace}.example"}, want: []string{"SERVICEBUS_ENDPOINT", "scheme"}},
		{name: "boolean", env: map[string]string{"RESCHED_WORKER_SERVICEBUS_EMULATOR": "maybe"}, want: []string{"SERVICEBUS_EMULATOR", `"maybe"`}},
		{name: "positional argument", args: []string{"run"}, want: []string{`"run"`}},
		{
			name: "passwords stay out of errors",
			env:  map[string]string{"NATS_URL": "http://u:hunter2@h"},
			want: []string{"NATS_URL", "u:xxxxx@h"},
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

func TestParseConfigHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"-help"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	cfg := defaultConfig()
	for _, s := range cfg.settings() {
		if !strings.Contains(out.String(), s.Env) || !strings.Contains(out.String(), "-"+s.Flag) {
			t.Errorf("usage does not mention %s (-%s):\n%s", s.Env, s.Flag, out.String())
		}
	}
}

func TestConfigLogValueHidesSecrets(t *testing.T) {
	cfg := defaultConfig()
	cfg.NATS.URL = "nats://s3cr3tt0ken@n1:4222,tls://user:pa55@n2:4222"
	cfg.ServiceBusEndpoint = "sb://u:sbpa55@{namespace}.example"
	got := cfg.LogValue().String()
	for _, secret := range []string{"s3cr3tt0ken", "pa55"} {
		if strings.Contains(got, secret) {
			t.Errorf("logged config %s leaks %q", got, secret)
		}
	}
	for _, kept := range []string{"n1:4222", "user:xxxxx@n2", "concurrency=16", "ack_wait=5s", "http_timeout=1m",
		"storage_queue_endpoint=https://{account}.queue.core.windows.net", "{namespace}.example"} {
		if !strings.Contains(got, kept) {
			t.Errorf("logged config %s lacks %q", got, kept)
		}
	}
}
