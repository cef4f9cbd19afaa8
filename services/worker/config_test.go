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
				"RESCHED_WORKER_LOG_LEVEL":      "error",
				"NATS_URL":                      "nats://n1:4222, nats://n2:4222",
				"RESCHED_WORKER_SUBJECT_PREFIX": "acme.scheduler",
				"RESCHED_WORKER_CONCURRENCY":    "64",
			},
			want: Config{LogLevel: slog.LevelError, NATSURL: "nats://n1:4222, nats://n2:4222", SubjectPrefix: "acme.scheduler", Concurrency: 64},
		},
		{
			name: "flags override environment",
			args: []string{"-log-level=debug", "-nats-url=wss://flag:443", "-subject-prefix=flag", "-concurrency=1"},
			env: map[string]string{
				"RESCHED_WORKER_LOG_LEVEL":      "error",
				"NATS_URL":                      "nats://env:4222",
				"RESCHED_WORKER_SUBJECT_PREFIX": "env",
				"RESCHED_WORKER_CONCURRENCY":    "64",
			},
			want: Config{LogLevel: slog.LevelDebug, NATSURL: "wss://flag:443", SubjectPrefix: "flag", Concurrency: 1},
		},
		{name: "upper bound", env: map[string]string{"RESCHED_WORKER_CONCURRENCY": "1024"}, want: Config{LogLevel: def.LogLevel, NATSURL: def.NATSURL, SubjectPrefix: def.SubjectPrefix, Concurrency: 1024}},
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
		{name: "concurrency zero", args: []string{"-concurrency", "0"}, want: []string{"-concurrency", "1 to 1024"}},
		{name: "concurrency too high", args: []string{"-concurrency", "1025"}, want: []string{"-concurrency"}},
		{name: "subject prefix", env: map[string]string{"RESCHED_WORKER_SUBJECT_PREFIX": "a b"}, want: []string{"RESCHED_WORKER_SUBJECT_PREFIX"}},
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
	for _, name := range []string{"RESCHED_WORKER_LOG_LEVEL", "NATS_URL", "RESCHED_WORKER_SUBJECT_PREFIX", "RESCHED_WORKER_CONCURRENCY"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("usage does not mention %s:\n%s", name, out.String())
		}
	}
}

func TestConfigLogValueHidesSecrets(t *testing.T) {
	cfg := defaultConfig()
	cfg.NATSURL = "nats://s3cr3tt0ken@n1:4222,tls://user:pa55@n2:4222"
	got := cfg.LogValue().String()
	for _, secret := range []string{"s3cr3tt0ken", "pa55"} {
		if strings.Contains(got, secret) {
			t.Errorf("logged config %s leaks %q", got, secret)
		}
	}
	for _, kept := range []string{"n1:4222", "user:xxxxx@n2", "concurrency=16"} {
		if !strings.Contains(got, kept) {
			t.Errorf("logged config %s lacks %q", got, kept)
		}
	}
}
