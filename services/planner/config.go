package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/services/internal/redisconn"
	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/planner/internal/api"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// envPrefix starts the name of every planner-only environment variable. NATS_URL and REDIS_URL
// are unprefixed: they are the names the NATS and Redis tooling already reads.
const envPrefix = "RESCHED_PLANNER_"

// Config is everything the planner reads at start. It is read once; changing it means a restart.
type Config struct {
	LogLevel      slog.Level
	NATS          natsconn.Options
	Redis         redisconn.Options
	Secrets       secrets.Options // where the keys that seal job secrets are
	SubjectPrefix string          // first token of every NATS subject, "scheduler" by default
	HTTPAddr      string          // /healthz, /readyz and /metrics
	Profiling     bool            // Go profiles under /debug/pprof/ on HTTPAddr

	RedisKeyPrefix   string            // first part of every Redis key
	Partitions       int               // partitions of the data (recorded in Redis at the first start)
	CatchUpWindow    time.Duration     // an occurrence missed by more than this is skipped, not fired
	CatchUpPolicy    job.CatchUpPolicy // what fires of the occurrences missed while no planner ran
	CatchUpRate      int               // most missed occurrences one job fires per second
	Lease            time.Duration     // how long a partition lease lasts without renewal
	MaxClockOffset   time.Duration     // how far the planner's clock may stray from Redis's
	MinReplicas      int               // Redis replicas every write of jobs and results waits for (0: none; store.AutoReplicas)
	ReplicaWait      time.Duration     // how long a write waits for them
	Batch            int               // due jobs per claim
	Concurrency      int               // partitions dispatched at once
	MaxIdle          time.Duration     // longest wait between two looks at the due set
	Lookahead        time.Duration     // how long before its time a job is claimed and prepared
	WakeLinger       time.Duration     // how long a partition woken by a put waits for more puts
	StreamReplicas   int               // JetStream replicas of the streams, when created
	PlacementTags    string            // comma-separated server tags the streams are placed on, when created
	DuplicateWindow  time.Duration     // JetStream duplicate window of the due and results streams
	MinRetryInterval time.Duration     // shortest retryInterval a job may ask for
	ShutdownTimeout  time.Duration     // how long a stop may take before the planner gives up
	APIConcurrency   int               // API requests worked on at once
	HistoryEntries   int               // history entries kept per job
	HistoryAge       time.Duration     // history entries older than this are dropped
	HistoryMessage   int               // bytes of a history entry's message kept

	// EmbeddedNATS, when set, is the listen address of a NATS server with JetStream that the
	// planner runs itself (NATSURL is then ignored): one binary plus Redis is a whole scheduler.
	EmbeddedNATS    string
	EmbeddedNATSDir string // where the embedded server keeps its JetStream data

	// Reencrypt makes the planner re-seal every stored job's secrets with the newest key and
	// exit, instead of serving.
	Reencrypt bool
	// Repartition makes the planner move the data Redis holds to Partitions and exit, instead of
	// serving; every planner must be stopped.
	Repartition bool

	policyText string           // CatchUpPolicy as set: latest or all, any case
	keys       *secrets.Keyring // Secrets, read
}

func defaultConfig() Config {
	return Config{
		LogLevel:         slog.LevelInfo,
		NATS:             natsconn.Options{URL: "nats://127.0.0.1:4222", PingInterval: natsconn.DefaultPingInterval},
		Redis:            redisconn.Options{URL: "redis://127.0.0.1:6379/0"},
		SubjectPrefix:    "scheduler",
		HTTPAddr:         ":8081",
		RedisKeyPrefix:   "resched",
		Partitions:       store.DefaultPartitions,
		CatchUpWindow:    time.Hour,
		CatchUpPolicy:    job.CatchUpLatest,
		policyText:       "latest",
		CatchUpRate:      10,
		Lease:            3 * time.Second,
		MaxClockOffset:   500 * time.Millisecond,
		MinReplicas:      config.Auto,
		ReplicaWait:      time.Second,
		Batch:            256,
		Concurrency:      16,
		MaxIdle:          time.Second,
		Lookahead:        250 * time.Millisecond,
		WakeLinger:       10 * time.Millisecond,
		StreamReplicas:   1,
		DuplicateWindow:  10 * time.Minute,
		MinRetryInterval: 15 * time.Second,
		EmbeddedNATSDir:  ".data/nats",
		ShutdownTimeout:  30 * time.Second,
		APIConcurrency:   api.DefaultConcurrency,
		HistoryEntries:   store.HistoryMaxEntries,
		HistoryAge:       store.HistoryMaxAge,
		HistoryMessage:   store.HistoryMaxMessage,
	}
}

// settings binds every setting to its field of c.
func (c *Config) settings() []config.Setting {
	p := envPrefix
	settings := []config.Setting{
		config.Define("log level", "log-level", p+"LOG_LEVEL", "log level: debug, info, warn or error", config.Level(&c.LogLevel)),
	}
	settings = append(settings, c.NATS.Settings()...)
	settings = append(settings, c.Redis.Settings()...)
	settings = append(settings, c.Secrets.Settings()...)
	return append(settings,
		config.Define("subject prefix", "subject-prefix", p+"SUBJECT_PREFIX", "first token of every NATS subject", config.Text(&c.SubjectPrefix, config.SubjectPrefix)),
		config.Define("HTTP address", "http-addr", p+"HTTP_ADDR", "listen address of /healthz, /readyz and /metrics", config.Text(&c.HTTPAddr, config.ListenAddr)),
		config.Define("profiling", "pprof", p+"PPROF", "serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on the HTTP address (off: a profile costs CPU while it runs)", config.Bool(&c.Profiling)),
		config.Define("Redis key prefix", "redis-key-prefix", p+"REDIS_KEY_PREFIX", "first part of every Redis key", config.Text(&c.RedisKeyPrefix, checkKeyPrefix)),
		config.Define("partitions", "partitions", p+"PARTITIONS", "partitions the data is spread over; recorded in Redis at the first start and fixed afterwards (more spread a Redis Cluster better)", config.Int(&c.Partitions, 1, store.MaxPartitions)),
		config.Define("catch-up window", "catch-up-window", p+"CATCH_UP_WINDOW", "an occurrence missed by more than this is skipped, not fired", config.Duration(&c.CatchUpWindow, time.Second)),
		config.Define("catch-up policy", "catch-up-policy", p+"CATCH_UP_POLICY", "what fires of the occurrences missed while every planner was down: latest (only the latest) or all (every one, in order); a job's recurrence.catchUpPolicy overrides it", config.Text(&c.policyText, checkPolicy)),
		config.Define("catch-up rate", "catch-up-rate", p+"CATCH_UP_RATE", "most missed occurrences one job fires per second while it catches up", config.Int(&c.CatchUpRate, 1, 10_000)),
		config.Define("lease", "lease", p+"LEASE", "how long a planner's lease on a partition lasts unrenewed: how soon the partitions of a planner that died are taken over; a third of it bounds each Redis call of the renewal and of a dispatch batch", config.Duration(&c.Lease, time.Second)),
		config.Define("max clock offset", "max-clock-offset", p+"MAX_CLOCK_OFFSET", "how far the planner's clock may stray from Redis's, the clock every planner shares, before it dispatches nothing and lets its partitions go (a clock ahead fires early)", config.Duration(&c.MaxClockOffset, 10*time.Millisecond)),
		config.Define("min replicas", "min-replicas", p+"MIN_REPLICAS", "Redis replicas that must have every write of jobs, collections and results before it counts (WAIT): a failover then loses none the planner acknowledged; a write they miss fails and is made again. auto: one while the master has one in sync, none while it has none (INFO replication, looked at each second); 0: Redis's asynchronous replication alone", config.IntOrAuto(&c.MinReplicas, 0, 16)),
		config.Define("replica wait", "replica-wait", p+"REPLICA_WAIT", "how long a write waits for the min replicas (at most 2s)", config.Duration(&c.ReplicaWait, time.Millisecond)),
		config.Define("batch", "batch", p+"BATCH", "due jobs advanced together (a round reads up to 32 batches)", config.Int(&c.Batch, 1, 10_000)),
		config.Define("concurrency", "concurrency", p+"CONCURRENCY", "partitions of the due set dispatched at once", config.Int(&c.Concurrency, 1, store.MaxPartitions)),
		config.Define("max idle", "max-idle", p+"MAX_IDLE", "longest wait between two looks at a partition with nothing due soon (a job put through any planner wakes it, after the wake linger)", config.Duration(&c.MaxIdle, time.Millisecond)),
		config.Define("lookahead", "lookahead", p+"LOOKAHEAD", "read and prepare jobs this long before they are due; each is still published at its time (0 to turn off)", config.Duration(&c.Lookahead, 0)),
		config.Define("wake linger", "wake-linger", p+"WAKE_LINGER", "how long a partition woken by a put waits for the puts that follow before it looks, so that jobs put to run now go out together (0: at once); never past the look the partition had planned, so at most max idle", config.Duration(&c.WakeLinger, 0)),
		config.Define("stream replicas", "stream-replicas", p+"STREAM_REPLICAS", "JetStream replicas of the streams when they are created (3 on a cluster); an existing stream keeps its own", config.Int(&c.StreamReplicas, 1, 5)),
		config.Define("stream placement tags", "stream-placement-tags", p+"STREAM_PLACEMENT_TAGS", "comma-separated server tags (server_tags) of the NATS servers that hold the streams, when they are created", config.OptionalText(&c.PlacementTags, checkTags)),
		config.Define("duplicate window", "duplicate-window", p+"DUPLICATE_WINDOW", "JetStream duplicate window of the due and results streams", config.Duration(&c.DuplicateWindow, time.Second)),
		config.Define("minimum retry interval", "min-retry-interval", p+"MIN_RETRY_INTERVAL", "shortest retryInterval a job may ask for", config.Duration(&c.MinRetryInterval, time.Second)),
		config.Define("shutdown timeout", "shutdown-timeout", p+"SHUTDOWN_TIMEOUT", "how long a stop may take", config.Duration(&c.ShutdownTimeout, time.Second)),
		config.Define("API concurrency", "api-concurrency", p+"API_CONCURRENCY", "API requests one planner works on at once", config.Int(&c.APIConcurrency, 1, 4096)),
		config.Define("history entries", "history-entries", p+"HISTORY_ENTRIES", "history entries kept per job (the newest)", config.Int(&c.HistoryEntries, 1, 1_000_000)),
		config.Define("history age", "history-age", p+"HISTORY_AGE", "history entries older than this are dropped", config.Duration(&c.HistoryAge, time.Hour)),
		config.Define("history message size", "history-message", p+"HISTORY_MESSAGE", "bytes kept of a history entry's message (the target's answer; workers send at most 8 KiB of it)", config.Int(&c.HistoryMessage, 0, 1<<20)),
		config.Define("embedded NATS address", "embedded-nats", p+"EMBEDDED_NATS", "run a NATS server with JetStream inside the planner, listening here (e.g. 127.0.0.1:4222); NATS_URL is then ignored", config.OptionalText(&c.EmbeddedNATS, config.ListenAddr)),
		config.Define("re-encrypt", "reencrypt", p+"REENCRYPT", "re-seal the secrets of every stored job with the newest secret key, then exit (after a key rotation)", config.Bool(&c.Reencrypt)),
		config.Define("repartition", "repartition", p+"REPARTITION", "move the data Redis holds to the partitions set here, then exit; every planner stopped first (docs/scaling.md)", config.Bool(&c.Repartition)),
		config.Define("embedded NATS directory", "embedded-nats-dir", p+"EMBEDDED_NATS_DIR", "where the embedded NATS server keeps its JetStream data", config.Text(&c.EmbeddedNATSDir, func(string) error { return nil })),
	)
}

// maxReplicaWait bounds ReplicaWait.
const maxReplicaWait = 2 * time.Second

// parseConfig builds the configuration from defaults, then the environment (through getenv, so
// tests need not touch the process environment), then flags. Usage and flag errors go to
// output; flag.ErrHelp is returned for -h. Every bad value is reported, each naming its flag
// and its variable.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (Config, error) {
	cfg := defaultConfig()
	errs, err := config.Parse("planner", cfg.settings(), args, getenv, output)
	if err != nil {
		return Config{}, err
	}
	if len(errs) == 0 && cfg.Lookahead >= cfg.Lease {
		// A round waits for its earliest message as long as the lookahead, holding the
		// partition: a planner must renew its lease meanwhile.
		errs = append(errs, fmt.Errorf("lookahead (-lookahead, %sLOOKAHEAD): %s must be shorter than the lease (%s)",
			envPrefix, config.FormatDuration(cfg.Lookahead), config.FormatDuration(cfg.Lease)))
	}
	if len(errs) == 0 && cfg.ReplicaWait > maxReplicaWait {
		// A WAIT longer than the Redis client's read time-out (3 s) would fail as a lost
		// connection rather than as replicas missing.
		errs = append(errs, fmt.Errorf("replica wait (-replica-wait, %sREPLICA_WAIT): %s is more than %s",
			envPrefix, config.FormatDuration(cfg.ReplicaWait), config.FormatDuration(maxReplicaWait)))
	}
	if len(errs) == 0 {
		cfg.CatchUpPolicy, _ = job.ParseCatchUpPolicy(cfg.policyText)
		errs = append(append(errs, cfg.NATS.Check()...), cfg.Redis.Check()...)
		var err error
		if cfg.keys, err = cfg.Secrets.Load(); err != nil {
			errs = append(errs, err)
		} else if cfg.Reencrypt && cfg.keys == nil {
			errs = append(errs, errors.New("re-encrypt (-reencrypt): no secret keys to seal with (-secret-keys-file, RESCHED_SECRET_KEYS_FILE)"))
		}
		if cfg.Reencrypt && cfg.Repartition {
			errs = append(errs, errors.New("re-encrypt (-reencrypt) and repartition (-repartition): one at a time"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// minReplicas is MinReplicas as the store takes it.
func (c Config) minReplicas() int {
	if c.MinReplicas == config.Auto {
		return store.AutoReplicas
	}
	return c.MinReplicas
}

// warnings are what the settings leave unsafe, said once at start.
func (c Config) warnings() []string {
	var w []string
	if c.keys == nil {
		w = append(w, c.keys.Describe()+" (set RESCHED_SECRET_KEYS_FILE on planners and workers to seal them)")
	}
	if c.Redis.FailsOver() && c.MinReplicas == 0 {
		// Measured by TestRedisClusterSplit's run without waiting: 36 history entries lost.
		w = append(w, "writes do not wait for a Redis replica: a failover can lose results already recorded (history "+
			"entries, executionCount) and jobs just put (set "+envPrefix+"MIN_REPLICAS=auto, or a number; docs/scaling.md)")
	}
	return w
}

// LogValue is what the planner logs of its configuration: credentials in URLs are masked, and
// durations read as they are written ("30s"; slog's JSON would print nanoseconds).
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("log_level", c.LogLevel.String()),
		slog.Attr{Key: "nats", Value: c.NATS.LogValue()},
		slog.String("embedded_nats", c.EmbeddedNATS),
		slog.Attr{Key: "redis", Value: c.Redis.LogValue()},
		slog.Any("secret_keys", c.keys.IDs()),
		slog.String("subject_prefix", c.SubjectPrefix),
		slog.String("http_addr", c.HTTPAddr),
		slog.Bool("pprof", c.Profiling),
		slog.String("redis_key_prefix", c.RedisKeyPrefix),
		slog.Int("partitions", c.Partitions),
		slog.String("catch_up_window", config.FormatDuration(c.CatchUpWindow)),
		slog.String("catch_up_policy", string(c.CatchUpPolicy)),
		slog.Int("catch_up_rate", c.CatchUpRate),
		slog.String("lease", config.FormatDuration(c.Lease)),
		slog.String("max_clock_offset", config.FormatDuration(c.MaxClockOffset)),
		slog.String("min_replicas", config.IntOrAuto(&c.MinReplicas, 0, 16).String()),
		slog.String("replica_wait", config.FormatDuration(c.ReplicaWait)),
		slog.String("lookahead", config.FormatDuration(c.Lookahead)),
		slog.Int("batch", c.Batch),
		slog.Int("concurrency", c.Concurrency),
		slog.String("max_idle", config.FormatDuration(c.MaxIdle)),
		slog.String("wake_linger", config.FormatDuration(c.WakeLinger)),
		slog.Int("stream_replicas", c.StreamReplicas),
		slog.String("stream_placement_tags", c.PlacementTags),
		slog.String("duplicate_window", config.FormatDuration(c.DuplicateWindow)),
		slog.String("min_retry_interval", config.FormatDuration(c.MinRetryInterval)),
		slog.String("shutdown_timeout", config.FormatDuration(c.ShutdownTimeout)),
		slog.Int("api_concurrency", c.APIConcurrency),
		slog.Int("history_entries", c.HistoryEntries),
		slog.String("history_age", config.FormatDuration(c.HistoryAge)),
		slog.Int("history_message", c.HistoryMessage),
	)
}

func checkPolicy(v string) error {
	if _, err := job.ParseCatchUpPolicy(v); err != nil {
		return fmt.Errorf("%q: must be latest or all", v)
	}
	return nil
}

// checkKeyPrefix refuses braces, which would change the Redis Cluster hash tags the store
// relies on, and white space.
func checkKeyPrefix(p string) error {
	if strings.ContainsAny(p, "{} \t\r\n") {
		return fmt.Errorf("%q may not hold braces or white space", p)
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
