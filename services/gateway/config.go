package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/internal/natsconn"
)

const envPrefix = "RESCHED_GATEWAY_"

// Config is everything the gateway reads at start.
type Config struct {
	LogLevel        slog.Level
	NATS            natsconn.Options
	SubjectPrefix   string        // first token of every NATS subject, as the planners'
	Addr            string        // where the ARM API listens
	TLSCert, TLSKey string        // HTTPS when both are set
	HTTPAddr        string        // /healthz, /readyz and /metrics
	Profiling       bool          // Go profiles under /debug/pprof/ on HTTPAddr
	AccessFile      string        // static tokens and OIDC principals, with their scopes
	OIDCIssuer      string        // accepted JWT issuer (none: static tokens only)
	OIDCAudience    string        // the audience those JWTs must carry
	PublicURL       string        // the gateway's URL as clients reach it, for nextLinks
	RequestTimeout  time.Duration // bound on one request to the planners
	ShutdownTimeout time.Duration // how long a stop waits for requests in flight
}

func defaultConfig() Config {
	return Config{
		LogLevel:        slog.LevelInfo,
		NATS:            natsconn.Options{URL: "nats://127.0.0.1:4222", PingInterval: natsconn.DefaultPingInterval},
		SubjectPrefix:   "scheduler",
		Addr:            ":8090",
		HTTPAddr:        ":8084",
		RequestTimeout:  30 * time.Second,
		ShutdownTimeout: 10 * time.Second,
	}
}

func (c *Config) settings() []config.Setting {
	p := envPrefix
	settings := []config.Setting{
		config.Define("log level", "log-level", p+"LOG_LEVEL", "log level: debug, info, warn or error", config.Level(&c.LogLevel)),
	}
	settings = append(settings, c.NATS.Settings()...)
	return append(settings,
		config.Define("subject prefix", "subject-prefix", p+"SUBJECT_PREFIX", "first token of every NATS subject (the planners')", config.Text(&c.SubjectPrefix, config.SubjectPrefix)),
		config.Define("address", "addr", p+"ADDR", "listen address of the Azure REST API", config.Text(&c.Addr, config.ListenAddr)),
		config.Define("TLS certificate", "tls-cert", p+"TLS_CERT", "PEM certificate (chain) of the API's HTTPS; with -tls-key", config.OptionalText(&c.TLSCert, anyValue)),
		config.Define("TLS key", "tls-key", p+"TLS_KEY", "PEM private key of the API's HTTPS; with -tls-cert", config.OptionalText(&c.TLSKey, anyValue)),
		config.Define("HTTP address", "http-addr", p+"HTTP_ADDR", "listen address of /healthz, /readyz and /metrics", config.Text(&c.HTTPAddr, config.ListenAddr)),
		config.Define("profiling", "pprof", p+"PPROF", "serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on the HTTP address (off: a profile costs CPU while it runs)", config.Bool(&c.Profiling)),
		config.Define("access file", "access-file", p+"ACCESS_FILE", "JSON file of the static tokens and OpenID Connect principals, with their roles and scopes", config.OptionalText(&c.AccessFile, anyValue)),
		config.Define("OIDC issuer", "oidc-issuer", p+"OIDC_ISSUER", "OpenID Connect issuer whose JWTs are accepted (its discovery document and keys are fetched)", config.OptionalText(&c.OIDCIssuer, checkIssuer)),
		config.Define("OIDC audience", "oidc-audience", p+"OIDC_AUDIENCE", "the audience (aud) the issuer's JWTs must carry", config.OptionalText(&c.OIDCAudience, anyValue)),
		config.Define("public URL", "public-url", p+"PUBLIC_URL", "the gateway's URL as clients reach it, the base of nextLinks (default: the request's scheme and host)", config.OptionalText(&c.PublicURL, checkPublicURL)),
		config.Define("request timeout", "request-timeout", p+"REQUEST_TIMEOUT", "bound on one request to the planners", config.Duration(&c.RequestTimeout, 100*time.Millisecond)),
		config.Define("shutdown timeout", "shutdown-timeout", p+"SHUTDOWN_TIMEOUT", "how long a stop waits for the requests in flight", config.Duration(&c.ShutdownTimeout, time.Second)),
	)
}

func checkIssuer(v string) error { return config.ServerURLs(v, "https", "http") }

func checkPublicURL(v string) error {
	if err := config.ServerURLs(v, "https", "http"); err != nil {
		return err
	}
	if strings.ContainsAny(v, ",?#") {
		return fmt.Errorf("%q: one URL without a query", v)
	}
	return nil
}

// parseConfig reads defaults, then the environment, then flags; every bad value is reported.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (Config, error) {
	cfg := defaultConfig()
	errs, err := config.Parse("gateway", cfg.settings(), args, getenv, output)
	if err != nil {
		return Config{}, err
	}
	if len(errs) == 0 {
		errs = cfg.NATS.Check()
		if cfg.OIDCIssuer != "" && cfg.OIDCAudience == "" {
			// Without it, a token the issuer made for any other application (for Entra ID, any
			// app of the tenant) would be accepted here.
			errs = append(errs, errors.New("-oidc-audience (RESCHED_GATEWAY_OIDC_AUDIENCE) is required with -oidc-issuer: without it the gateway would accept the issuer's tokens for any application"))
		}
		if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
			errs = append(errs, errors.New("-tls-cert (RESCHED_GATEWAY_TLS_CERT) and -tls-key (RESCHED_GATEWAY_TLS_KEY): both or neither"))
		}
		switch {
		case cfg.AccessFile == "":
			errs = append(errs, errors.New("-access-file (RESCHED_GATEWAY_ACCESS_FILE) is required: without it nobody could call the gateway (docs/azure-migration.md, Access)"))
		default:
			if _, err := access.Load(cfg.AccessFile); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// LogValue is what the gateway logs of its configuration, credentials masked.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("log_level", c.LogLevel.String()),
		slog.Attr{Key: "nats", Value: c.NATS.LogValue()},
		slog.String("subject_prefix", c.SubjectPrefix),
		slog.String("addr", c.Addr),
		slog.Bool("https", c.TLSCert != ""),
		slog.String("http_addr", c.HTTPAddr),
		slog.Bool("pprof", c.Profiling),
		slog.String("access_file", c.AccessFile),
		slog.String("oidc_issuer", c.OIDCIssuer),
		slog.String("oidc_audience", c.OIDCAudience),
		slog.String("public_url", c.PublicURL),
		slog.String("request_timeout", config.FormatDuration(c.RequestTimeout)),
		slog.String("shutdown_timeout", config.FormatDuration(c.ShutdownTimeout)),
	)
}

// anyValue accepts any value: a path or a name checked where it is used.
func anyValue(string) error { return nil }
