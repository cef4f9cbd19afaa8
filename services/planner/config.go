package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
)

// envPrefix starts the name of every planner-only environment variable. NATS_URL and REDIS_URL
// are unprefixed: they are the names the NATS and Redis tooling already reads.
const envPrefix = "RESCHED_PLANNER_"

// Config is everything the planner reads at start. It is read once; changing it means a restart.
type Config struct {
	LogLevel      slog.Level
	NATSURL       string // one server or a comma-separated list
	RedisURL      string
	SubjectPrefix string // first token of every NATS subject, "scheduler" by default
}

func defaultConfig() Config {
	return Config{
		LogLevel:      slog.LevelInfo,
		NATSURL:       "nats://127.0.0.1:4222",
		RedisURL:      "redis://127.0.0.1:6379/0",
		SubjectPrefix: "scheduler",
	}
}

// parseConfig builds the configuration from defaults, then the environment (through getenv, so
// tests need not touch the process environment), then flags. Usage and flag errors go to
// output; flag.ErrHelp is returned for -h.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (Config, error) {
	cfg := defaultConfig()
	logLevel := strings.ToLower(cfg.LogLevel.String())
	env := []struct {
		name string
		dst  *string
	}{
		{envPrefix + "LOG_LEVEL", &logLevel},
		{"NATS_URL", &cfg.NATSURL},
		{"REDIS_URL", &cfg.RedisURL},
		{envPrefix + "SUBJECT_PREFIX", &cfg.SubjectPrefix},
	}
	for _, e := range env {
		if v, ok := lookup(getenv, e.name); ok {
			*e.dst = v
		}
	}

	fs := flag.NewFlagSet("planner", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&logLevel, "log-level", logLevel, "log level: debug, info, warn or error (env "+envPrefix+"LOG_LEVEL)")
	fs.StringVar(&cfg.NATSURL, "nats-url", cfg.NATSURL, "NATS server URL, or a comma-separated list (env NATS_URL)")
	fs.StringVar(&cfg.RedisURL, "redis-url", cfg.RedisURL, "Redis URL, redis:// or rediss:// (env REDIS_URL)")
	fs.StringVar(&cfg.SubjectPrefix, "subject-prefix", cfg.SubjectPrefix, "first token of every NATS subject (env "+envPrefix+"SUBJECT_PREFIX)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q: the planner takes flags only", fs.Arg(0))
	}

	var errs []error
	if err := cfg.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("log level (-log-level, %sLOG_LEVEL): %q is not debug, info, warn or error", envPrefix, logLevel))
	}
	if err := validateServerURLs(cfg.NATSURL, "nats", "tls", "ws", "wss"); err != nil {
		errs = append(errs, fmt.Errorf("NATS URL (-nats-url, NATS_URL): %w", err))
	}
	if err := validateServerURLs(cfg.RedisURL, "redis", "rediss"); err != nil {
		errs = append(errs, fmt.Errorf("Redis URL (-redis-url, REDIS_URL): %w", err))
	} else if strings.Contains(cfg.RedisURL, ",") {
		errs = append(errs, errors.New("Redis URL (-redis-url, REDIS_URL): one URL only"))
	}
	if err := validateSubjectPrefix(cfg.SubjectPrefix); err != nil {
		errs = append(errs, fmt.Errorf("subject prefix (-subject-prefix, %sSUBJECT_PREFIX): %w", envPrefix, err))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// LogValue is what the planner logs of its configuration: credentials in URLs are masked.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("log_level", c.LogLevel.String()),
		slog.String("nats_url", redactURLs(c.NATSURL)),
		slog.String("redis_url", redactURLs(c.RedisURL)),
		slog.String("subject_prefix", c.SubjectPrefix),
	)
}

// lookup treats an empty variable as unset, as shells and compose files often export VAR="".
func lookup(getenv func(string) string, name string) (string, bool) {
	v := strings.TrimSpace(getenv(name))
	return v, v != ""
}

// validateServerURLs checks a comma-separated list of URLs for a host and an allowed scheme.
func validateServerURLs(list string, schemes ...string) error {
	for _, raw := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			// url.Error quotes the raw URL, which may hold a password.
			return fmt.Errorf("%q is not a URL", redactURLs(raw))
		}
		if !contains(schemes, u.Scheme) {
			return fmt.Errorf("%q: scheme must be one of %s", u.Redacted(), strings.Join(schemes, ", "))
		}
		if u.Hostname() == "" {
			return fmt.Errorf("%q has no host", u.Redacted())
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// redactURLs masks the password (or a lone user token, as NATS uses) of each URL in a list.
func redactURLs(list string) string {
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

// validateSubjectPrefix accepts one or more NATS subject tokens without wildcards or spaces.
func validateSubjectPrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("%q has an empty token", p)
		}
		if strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("%q may not hold wildcards or white space", p)
		}
	}
	return nil
}
