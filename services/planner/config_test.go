package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
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
			want: Config{
				LogLevel:      slog.LevelDebug,
				NATSURL:       "nats://n1:4222,nats://n2:4222",
				RedisURL:      "rediss://:pw@redis.example:6380/2",
				SubjectPrefix: "acme.scheduler",
			},
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
			want: Config{LogLevel: slog.LevelWarn, NATSURL: "tls://flag:4222", RedisURL: "redis://flag:6379", SubjectPrefix: "flag"},
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
		{name: "Redis list", env: map[string]string{"REDIS_URL": "redis://a,redis://b"}, want: []string{"REDIS_URL", "one URL"}},
		{name: "subject wildcard", args: []string{"-subject-prefix", "a.*"}, want: []string{"RESCHED_PLANNER_SUBJECT_PREFIX", "wildcards"}},
		{name: "subject empty token", args: []string{"-subject-prefix", "a."}, want: []string{"-subject-prefix", "empty token"}},
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

func TestParseConfigHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"-h"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"RESCHED_PLANNER_LOG_LEVEL", "NATS_URL", "REDIS_URL", "RESCHED_PLANNER_SUBJECT_PREFIX"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("usage does not mention %s:\n%s", name, out.String())
		}
	}
}

func TestConfigLogValueHidesSecrets(t *testing.T) {
	cfg := defaultConfig()
	cfg.NATSURL = "nats://s3cr3tt0ken@n1:4222,nats://user:pa55@n2:4222"
	cfg.RedisURL = "redis://default:hunter2@redis:6379/0"
	got := cfg.LogValue().String()
	for _, secret := range []string{"s3cr3tt0ken", "pa55", "hunter2"} {
		if strings.Contains(got, secret) {
			t.Errorf("logged config %s leaks %q", got, secret)
		}
	}
	for _, kept := range []string{"n1:4222", "user:xxxxx@n2", "default:xxxxx@redis"} {
		if !strings.Contains(got, kept) {
			t.Errorf("logged config %s lacks %q", got, kept)
		}
	}
}
