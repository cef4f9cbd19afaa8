package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// serviceVars is what one program reads from its environment.
type serviceVars struct {
	sources  []string // the files that name the variables, relative to the repository root
	prefix   string   // the prefix of the service's own variables, "" when it has none
	names    []string // every variable the program reads
	required []string // variables a deployment must set: the defaults point at 127.0.0.1
	listen   string   // the variable holding the program's HTTP listen address
	port     int32    // the port it listens on when listen is not set
}

// knownEnv lists the environment variables each program reads, so the deployment files can be
// checked for names the program would silently ignore (a typo, a renamed setting).
// TestKnownEnvMatchesSource keeps it honest against the code. It is a read-only table.
var knownEnv = map[string]serviceVars{
	"planner": {
		sources: []string{"services/planner/config.go", natsSource, redisSource, secretsSource},
		prefix:  "RESCHED_PLANNER_",
		names: slices.Concat(natsVars, redisVars, secretVars, []string{
			"RESCHED_PLANNER_LOG_LEVEL", "RESCHED_PLANNER_SUBJECT_PREFIX", "RESCHED_PLANNER_HTTP_ADDR",
			"RESCHED_PLANNER_REDIS_KEY_PREFIX", "RESCHED_PLANNER_CATCH_UP_WINDOW", "RESCHED_PLANNER_LEASE",
			"RESCHED_PLANNER_BATCH", "RESCHED_PLANNER_CONCURRENCY", "RESCHED_PLANNER_MAX_IDLE",
			"RESCHED_PLANNER_STREAM_REPLICAS", "RESCHED_PLANNER_DUPLICATE_WINDOW",
			"RESCHED_PLANNER_MIN_RETRY_INTERVAL", "RESCHED_PLANNER_SHUTDOWN_TIMEOUT",
			"RESCHED_PLANNER_EMBEDDED_NATS", "RESCHED_PLANNER_EMBEDDED_NATS_DIR", "RESCHED_PLANNER_PARTITIONS",
			"RESCHED_PLANNER_CATCH_UP_POLICY", "RESCHED_PLANNER_CATCH_UP_RATE", "RESCHED_PLANNER_LOOKAHEAD",
			"RESCHED_PLANNER_WAKE_LINGER", "RESCHED_PLANNER_MAX_CLOCK_OFFSET", "RESCHED_PLANNER_MIN_REPLICAS",
			"RESCHED_PLANNER_REPLICA_WAIT",
			"RESCHED_PLANNER_REENCRYPT",
		}),
		required: []string{"NATS_URL", "REDIS_URL"},
		listen:   "RESCHED_PLANNER_HTTP_ADDR",
		port:     8081,
	},
	"worker": {
		sources: []string{"services/worker/config.go", natsSource, secretsSource},
		prefix:  "RESCHED_WORKER_",
		names: slices.Concat(natsVars, secretVars, []string{
			"RESCHED_WORKER_LOG_LEVEL", "RESCHED_WORKER_SUBJECT_PREFIX", "RESCHED_WORKER_HTTP_ADDR",
			"RESCHED_WORKER_REGION", "RESCHED_WORKER_CONCURRENCY", "RESCHED_WORKER_COLLECTION_CONCURRENCY", "RESCHED_WORKER_ACK_WAIT",
			"RESCHED_WORKER_MAX_ACK_PENDING", "RESCHED_WORKER_HTTP_TIMEOUT", "RESCHED_WORKER_MIN_RETRY_INTERVAL",
			"RESCHED_WORKER_SHUTDOWN_TIMEOUT", "RESCHED_WORKER_RESULT_LINGER", "RESCHED_WORKER_STREAM_REPLICAS", "RESCHED_WORKER_DENY_NETWORKS", "RESCHED_WORKER_TARGET_CA", "RESCHED_WORKER_OAUTH_AUTHORITY",
			"RESCHED_WORKER_STORAGE_QUEUE_ENDPOINT", "RESCHED_WORKER_STORAGE_QUEUE_BASE64",
			"RESCHED_WORKER_SERVICEBUS_ENDPOINT", "RESCHED_WORKER_SERVICEBUS_EMULATOR",
		}),
		required: []string{"NATS_URL"},
		listen:   "RESCHED_WORKER_HTTP_ADDR",
		port:     8082,
	},
	"gateway": {
		sources: []string{"services/gateway/config.go", natsSource},
		prefix:  "RESCHED_GATEWAY_",
		names: slices.Concat(natsVars, []string{
			"RESCHED_GATEWAY_LOG_LEVEL", "RESCHED_GATEWAY_SUBJECT_PREFIX", "RESCHED_GATEWAY_ADDR",
			"RESCHED_GATEWAY_TLS_CERT", "RESCHED_GATEWAY_TLS_KEY", "RESCHED_GATEWAY_HTTP_ADDR",
			"RESCHED_GATEWAY_ACCESS_FILE", "RESCHED_GATEWAY_OIDC_ISSUER", "RESCHED_GATEWAY_OIDC_AUDIENCE",
			"RESCHED_GATEWAY_PUBLIC_URL", "RESCHED_GATEWAY_REQUEST_TIMEOUT", "RESCHED_GATEWAY_SHUTDOWN_TIMEOUT",
		}),
		required: []string{"NATS_URL", "RESCHED_GATEWAY_ACCESS_FILE"},
		listen:   "RESCHED_GATEWAY_HTTP_ADDR",
		port:     8084,
	},
	"target": {
		sources: []string{"services/target/main.go"},
		names:   []string{"TARGET_ADDR"},
		listen:  "TARGET_ADDR",
		port:    8080,
	},
}

// The connection and key settings the services share, and where they are defined.
const (
	natsSource    = "services/internal/natsconn/natsconn.go"
	redisSource   = "services/internal/redisconn/redisconn.go"
	secretsSource = "services/internal/secrets/options.go"
)

var (
	natsVars = []string{"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY",
		"NATS_CA", "NATS_CERT", "NATS_KEY", "NATS_INBOX_PREFIX", "NATS_JS_DOMAIN"}
	redisVars  = []string{"REDIS_URL", "REDIS_USERNAME", "REDIS_PASSWORD", "REDIS_CA", "REDIS_CERT", "REDIS_KEY"}
	secretVars = []string{"RESCHED_SECRET_KEYS", "RESCHED_SECRET_KEYS_FILE"}
)

// goRuntimeEnv are variables the Go runtime reads, which any of the programs may be given.
var goRuntimeEnv = []string{"GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOGC"}

// repoRoot is the repository root: the tests run in deploy/.
const repoRoot = ".."

// knows reports whether the program reads name: one of its variables, X_FILE for one of them
// (the services read any setting from a file that way), or one of the Go runtime's.
func (s serviceVars) knows(name string) bool {
	if s.prefix != "" {
		if base, ok := strings.CutSuffix(name, "_FILE"); ok && slices.Contains(s.names, base) {
			return true
		}
	}
	return slices.Contains(s.names, name) || slices.Contains(goRuntimeEnv, name)
}

// TestKnownEnvMatchesSource fails when a program stops reading a variable knownEnv lists: each
// name (without the service prefix) must appear as a string literal in the program's source,
// and the prefix too.
func TestKnownEnvMatchesSource(t *testing.T) {
	for service, vars := range knownEnv {
		t.Run(service, func(t *testing.T) {
			var text string
			for _, source := range vars.sources {
				src, err := os.ReadFile(filepath.Join(repoRoot, source))
				if err != nil {
					t.Fatal(err)
				}
				text += string(src)
			}
			if vars.prefix != "" && !strings.Contains(text, `"`+vars.prefix+`"`) {
				t.Errorf("%s do not define the prefix %q", vars.sources, vars.prefix)
			}
			for _, name := range vars.names {
				literal := name
				if vars.prefix != "" && strings.HasPrefix(name, vars.prefix) {
					literal = strings.TrimPrefix(name, vars.prefix)
				}
				if !strings.Contains(text, `"`+literal+`"`) {
					t.Errorf("%s no longer read %s (no string literal %q): update knownEnv", vars.sources, name, literal)
				}
			}
			for _, name := range vars.required {
				if !slices.Contains(vars.names, name) {
					t.Errorf("required %s is not among the names", name)
				}
			}
		})
	}
}
