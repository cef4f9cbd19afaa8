package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
)

// envPrefix starts the name of every worker-only environment variable. NATS_URL is unprefixed:
// it is the name the NATS tooling already reads.
const envPrefix = "RESCHED_WORKER_"

// maxConcurrency bounds Concurrency: each delivery may hold a connection to a target for up to
// its time-out, and a worker scales out by replicas, not by one huge process.
const maxConcurrency = 1024

// maxResultLinger bounds ResultLinger and ResultMaxWait: a result waits for company, not for
// long (its due message is settled after it, and its job's history and status lag by as much).
const maxResultLinger = time.Second

// Config is everything the worker reads at start. It is read once; changing it means a restart.
type Config struct {
	LogLevel      slog.Level
	NATS          natsconn.Options
	Secrets       secrets.Options // where the keys that open job secrets are
	SubjectPrefix string          // first token of every NATS subject, "scheduler" by default
	HTTPAddr      string          // /healthz, /readyz and /metrics
	Profiling     bool            // Go profiles under /debug/pprof/ on HTTPAddr
	Region        string          // told to targets (the Storage Queue envelope's Region)

	Concurrency      int           // deliveries in flight at once
	CollectionLimit  int           // deliveries of one collection in flight at once; 0: no limit
	AckWait          time.Duration // how long a delivery may go unsettled before another worker gets it
	MaxAckPending    int           // due messages held by all workers together, waiting retries included
	AttemptTimeout   time.Duration // time-out of one attempt of any action (HTTP_TIMEOUT)
	MinRetryInterval time.Duration // floor under every retry interval
	ShutdownTimeout  time.Duration // how long a stop waits for the deliveries in flight
	ResultLinger     time.Duration // how long a result waits for others to go in one message
	ResultMaxWait    time.Duration // how long results wait in all while the worker is delivering
	StreamReplicas   int           // replicas of the streams, when a worker is the first to create them
	PlacementTags    string        // comma-separated server tags the streams are placed on, when created

	DenyNetworks         string // addresses no HTTP action may connect to (httpaction.ParseNetworks)
	TargetCA             string // PEM file of CAs trusted for HTTPS targets, besides the system's
	OAuthAuthority       string // where ActiveDirectoryOAuth tokens come from
	StorageQueueEndpoint string // queue service URL template with {account}
	StorageQueueBase64   bool   // base64-encode the envelope
	ServiceBusEndpoint   string // sb:// endpoint template with {namespace}
	ServiceBusEmulator   bool   // plain AMQP to the Service Bus emulator

	keys *secrets.Keyring // Secrets, read
}

func defaultConfig() Config {
	return Config{
		LogLevel:             slog.LevelInfo,
		NATS:                 natsconn.Options{URL: "nats://127.0.0.1:4222", PingInterval: natsconn.DefaultPingInterval},
		SubjectPrefix:        "scheduler",
		HTTPAddr:             ":8082",
		Region:               "local",
		Concurrency:          16,
		AckWait:              5 * time.Second,
		MaxAckPending:        10_000,
		AttemptTimeout:       60 * time.Second,
		MinRetryInterval:     15 * time.Second,
		ShutdownTimeout:      30 * time.Second,
		ResultLinger:         100 * time.Millisecond,
		ResultMaxWait:        500 * time.Millisecond,
		StreamReplicas:       1,
		DenyNetworks:         httpaction.DefaultDenyNetworks,
		OAuthAuthority:       "https://login.microsoftonline.com",
		StorageQueueEndpoint: "https://{account}.queue.core.windows.net",
		ServiceBusEndpoint:   "sb://{namespace}.servicebus.windows.net",
	}
}

// settings binds every setting to its field of c.
func (c *Config) settings() []config.Setting {
	p := envPrefix
	settings := []config.Setting{
		config.Define("log level", "log-level", p+"LOG_LEVEL", "log level: debug, info, warn or error", config.Level(&c.LogLevel)),
	}
	settings = append(settings, c.NATS.Settings()...)
	settings = append(settings, c.Secrets.Settings()...)
	return append(settings,
		config.Define("subject prefix", "subject-prefix", p+"SUBJECT_PREFIX", "first token of every NATS subject", config.Text(&c.SubjectPrefix, config.SubjectPrefix)),
		config.Define("HTTP address", "http-addr", p+"HTTP_ADDR", "listen address of /healthz, /readyz and /metrics", config.Text(&c.HTTPAddr, config.ListenAddr)),
		config.Define("profiling", "pprof", p+"PPROF", "serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on the HTTP address (off: a profile costs CPU while it runs)", config.Bool(&c.Profiling)),
		config.Define("region", "region", p+"REGION", "region name told to targets (the Storage Queue envelope)", config.Text(&c.Region, checkOneLine)),
		config.Define("concurrency", "concurrency", p+"CONCURRENCY", "deliveries in flight at once", config.Int(&c.Concurrency, 1, maxConcurrency)),
		config.Define("collection concurrency", "collection-concurrency", p+"COLLECTION_CONCURRENCY", "the most deliveries of one collection in flight at once, so that a team whose targets hang cannot hold every slot; its other occurrences wait their turn (0: no limit)", config.Int(&c.CollectionLimit, 0, maxConcurrency)),
		config.Define("ack wait", "ack-wait", p+"ACK_WAIT", "how soon the delivery of a worker that died goes to another worker; a running delivery tells the server it is in progress every third of it", config.Duration(&c.AckWait, 3*time.Second)),
		config.Define("max ack pending", "max-ack-pending", p+"MAX_ACK_PENDING", "due messages held by all workers together, retries waiting for their interval included", config.Int(&c.MaxAckPending, 1, 10_000_000)),
		config.Define("HTTP time-out", "http-timeout", p+"HTTP_TIMEOUT", "time-out of one attempt: an HTTP request, a queue or Service Bus send", config.Duration(&c.AttemptTimeout, time.Millisecond)),
		config.Define("minimum retry interval", "min-retry-interval", p+"MIN_RETRY_INTERVAL", "floor under every retry interval", config.Duration(&c.MinRetryInterval, time.Millisecond)),
		config.Define("shutdown timeout", "shutdown-timeout", p+"SHUTDOWN_TIMEOUT", "how long a stop waits for the deliveries in flight", config.Duration(&c.ShutdownTimeout, time.Second)),
		config.Define("result max wait", "result-max-wait", p+"RESULT_MAX_WAIT", "how long results wait in all, from the first, while the worker is still delivering, so that recording them takes the CPU after the deliveries (at least the linger)", config.Duration(&c.ResultMaxWait, 0)),
		config.Define("result linger", "result-linger", p+"RESULT_LINGER", "how long a result waits for others to go with it in one message to the planners (0: at once); the due message is settled after", config.Duration(&c.ResultLinger, 0)),
		config.Define("stream replicas", "stream-replicas", p+"STREAM_REPLICAS", "JetStream replicas of the streams, when a worker is the first to create them", config.Int(&c.StreamReplicas, 1, 5)),
		config.Define("stream placement tags", "stream-placement-tags", p+"STREAM_PLACEMENT_TAGS", "comma-separated server tags of the NATS servers that hold the streams, when a worker is the first to create them", config.OptionalText(&c.PlacementTags, checkTags)),
		config.Define("deny networks", "deny-networks", p+"DENY_NETWORKS", "addresses no HTTP action may connect to, redirects and names resolved included: comma-separated networks (10.0.0.0/8), addresses, metadata (the cloud metadata services), loopback, private, or none", config.Text(&c.DenyNetworks, checkNetworks)),
		config.Define("target CA", "target-ca", p+"TARGET_CA", "PEM file of the CAs (a private CA) trusted for HTTPS targets, OAuth token endpoints, the Storage Queue endpoint and Service Bus namespaces, besides the system's", config.OptionalText(&c.TargetCA, c.readTargetCA)),
		config.Define("OAuth authority", "oauth-authority", p+"OAUTH_AUTHORITY", "where ActiveDirectoryOAuth tokens come from: <authority>/<tenant>/oauth2/token", config.Text(&c.OAuthAuthority, checkAuthority)),
		config.Define("Storage Queue endpoint", "storage-queue-endpoint", p+"STORAGE_QUEUE_ENDPOINT", "queue service URL, {account} standing for the job's storage account (Azurite: http://127.0.0.1:10001/{account})", config.Text(&c.StorageQueueEndpoint, checkTemplate("{account}", "http", "https"))),
		config.Define("Storage Queue base64", "storage-queue-base64", p+"STORAGE_QUEUE_BASE64", "base64-encode the Storage Queue envelope, for consumers that expect it", config.Bool(&c.StorageQueueBase64)),
		config.Define("Service Bus endpoint", "servicebus-endpoint", p+"SERVICEBUS_ENDPOINT", "Service Bus endpoint, {namespace} standing for the job's namespace (emulator: sb://127.0.0.1:5672)", config.Text(&c.ServiceBusEndpoint, checkTemplate("{namespace}", "sb"))),
		config.Define("Service Bus emulator", "servicebus-emulator", p+"SERVICEBUS_EMULATOR", "speak plain AMQP to the Service Bus emulator, never for Azure", config.Bool(&c.ServiceBusEmulator)),
	)
}

// parseConfig builds the configuration from defaults, then the environment (through getenv, so
// tests need not touch the process environment), then flags. Usage and flag errors go to
// output; flag.ErrHelp is returned for -h. Every bad value is reported, each naming its flag
// and its variable.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (Config, error) {
	cfg := defaultConfig()
	errs, err := config.Parse("worker", cfg.settings(), args, getenv, output)
	if err != nil {
		return Config{}, err
	}
	if cfg.ResultLinger > maxResultLinger {
		errs = append(errs, fmt.Errorf("result linger (-result-linger, %sRESULT_LINGER): %s is more than %s", envPrefix,
			config.FormatDuration(cfg.ResultLinger), config.FormatDuration(maxResultLinger)))
	}
	if cfg.ResultMaxWait > maxResultLinger {
		errs = append(errs, fmt.Errorf("result max wait (-result-max-wait, %sRESULT_MAX_WAIT): %s is more than %s", envPrefix,
			config.FormatDuration(cfg.ResultMaxWait), config.FormatDuration(maxResultLinger)))
	}
	if len(errs) == 0 {
		errs = append(errs, cfg.NATS.Check()...)
		var err error
		if cfg.keys, err = cfg.Secrets.Load(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// readTargetCA checks the file by reading it: a bad one fails the start. The deliverers read it
// again, and again when it changes (targetTrust).
func (c *Config) readTargetCA(file string) error {
	_, err := targetCAs(file)
	return err
}

// targetCAs is the system's pool with the certificates of file added; nil for no file. A
// private CA is added to the public ones rather than replacing them, so that one worker calls
// internal and public targets alike.
func targetCAs(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", file, errors.Unwrap(err))
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system pool on this platform: the file's alone
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// LogValue is what the worker logs of its configuration: credentials in URLs are masked, and
// durations read as they are written ("30s"; slog's JSON would print nanoseconds).
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("log_level", c.LogLevel.String()),
		slog.Attr{Key: "nats", Value: c.NATS.LogValue()},
		slog.Any("secret_keys", c.keys.IDs()),
		slog.String("subject_prefix", c.SubjectPrefix),
		slog.String("http_addr", c.HTTPAddr),
		slog.Bool("pprof", c.Profiling),
		slog.String("region", c.Region),
		slog.Int("concurrency", c.Concurrency),
		slog.Int("collection_concurrency", c.CollectionLimit),
		slog.String("ack_wait", config.FormatDuration(c.AckWait)),
		slog.Int("max_ack_pending", c.MaxAckPending),
		slog.String("http_timeout", config.FormatDuration(c.AttemptTimeout)),
		slog.String("min_retry_interval", config.FormatDuration(c.MinRetryInterval)),
		slog.String("shutdown_timeout", config.FormatDuration(c.ShutdownTimeout)),
		slog.String("result_linger", config.FormatDuration(c.ResultLinger)),
		slog.String("result_max_wait", config.FormatDuration(c.ResultMaxWait)),
		slog.Int("stream_replicas", c.StreamReplicas),
		slog.String("stream_placement_tags", c.PlacementTags),
		slog.String("deny_networks", c.DenyNetworks),
		slog.String("target_ca", c.TargetCA),
		slog.String("oauth_authority", config.RedactURLs(c.OAuthAuthority)),
		slog.String("storage_queue_endpoint", redactTemplate(c.StorageQueueEndpoint, "{account}")),
		slog.Bool("storage_queue_base64", c.StorageQueueBase64),
		slog.String("servicebus_endpoint", redactTemplate(c.ServiceBusEndpoint, "{namespace}")),
		slog.Bool("servicebus_emulator", c.ServiceBusEmulator),
	)
}

// checkNetworks accepts a deny list httpaction reads.
func checkNetworks(v string) error {
	_, err := httpaction.ParseNetworks(v)
	return err
}

// checkAuthority accepts one http(s) URL without a query: the tenant and the token path are
// appended to it.
func checkAuthority(v string) error {
	if err := config.ServerURLs(v, "https", "http"); err != nil {
		return err
	}
	if strings.ContainsAny(v, ",?#") {
		return fmt.Errorf("%q: one URL without a query or fragment", config.RedactURLs(v))
	}
	return nil
}

// checkTemplate accepts a URL template with one of the schemes; the placeholder is optional
// (an emulator takes every account or namespace at one address).
func checkTemplate(placeholder string, schemes ...string) func(string) error {
	return func(v string) error {
		if err := config.ServerURLs(strings.ReplaceAll(v, placeholder, templateName), schemes...); err != nil {
			return errors.New(strings.ReplaceAll(err.Error(), templateName, placeholder))
		}
		if strings.ContainsAny(v, ",?#; ") {
			return fmt.Errorf("%q: one URL without a query, a fragment or options", redactTemplate(v, placeholder))
		}
		return nil
	}
}

// templateName stands for a template's placeholder while the template is parsed as a URL
// (braces are not allowed in a host name).
const templateName = "placeholder"

// redactTemplate is config.RedactURLs for a URL template.
func redactTemplate(v, placeholder string) string {
	return strings.ReplaceAll(config.RedactURLs(strings.ReplaceAll(v, placeholder, templateName)), templateName, placeholder)
}

func checkOneLine(v string) error {
	if strings.ContainsAny(v, "\r\n") {
		return errors.New("must be one line")
	}
	return nil
}

// checkTags accepts comma-separated NATS server tags: no white space inside a tag.
func checkTags(v string) error {
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t == "" || strings.ContainsAny(t, " \t") {
			return fmt.Errorf("%q: want comma-separated tags such as az:a,ssd", v)
		}
	}
	return nil
}
