// Package redisconn builds the planner's Redis client from one URL and its TLS files, for the
// topologies users run, in the URL forms other Go and Python projects use:
//
//	redis://[user:password@]host:port/db              one server (rediss:// with TLS)
//	redis+cluster://[user:password@]host:port,host:port/   Redis Cluster (rediss+cluster://)
//	redis+sentinel://[user:password@]host:port,host:port/master[/db]   Sentinel (rediss+sentinel://)
//
// A user and password are an ACL user (or the default user's password); with Sentinel they are
// the data nodes', and the sentinels are asked with the same ones unless the query sets
// sentinel_user and sentinel_password. go-redis's own query options (pool_size, dial_timeout…)
// are accepted on the one-server form.
package redisconn

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/certfile"
	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/internal/reload"
)

// Options say how to reach Redis.
type Options struct {
	URL string
	// User and Password, when Password is set, replace those of the URL: the URL can then sit
	// in a ConfigMap and the password alone in a Secret (REDIS_PASSWORD_FILE).
	User, Password string
	// PasswordFile is the file Password was read from (REDIS_PASSWORD_FILE), read again at
	// each new connection, so a password rotated in place reaches the planner without a
	// restart.
	PasswordFile string
	CA           string // PEM file of the CAs that sign the servers' certificates
	Cert, Key    string // PEM files of a client certificate and its key
}

// Settings are the options as a service's settings: -redis-url, -redis-user, -redis-password,
// -redis-ca, -redis-cert, -redis-key; REDIS_URL, REDIS_USERNAME, REDIS_PASSWORD, REDIS_CA,
// REDIS_CERT, REDIS_KEY.
func (o *Options) Settings() []config.Setting {
	none := func(string) error { return nil }
	return []config.Setting{
		config.Define("Redis URL", "redis-url", "REDIS_URL",
			"redis:// or rediss:// (one server), redis+cluster://h:p,h:p/ (Cluster), redis+sentinel://h:p,h:p/master/db (Sentinel)",
			config.Text(&o.URL, checkURL)),
		config.Define("Redis user", "redis-user", "REDIS_USERNAME", "ACL user, with -redis-password (instead of the URL's)", config.OptionalText(&o.User, none)),
		config.Define("Redis password", "redis-password", "REDIS_PASSWORD", "password (of -redis-user, else of the default user), instead of the URL's", config.Secret(&o.Password, &o.PasswordFile, none)),
		config.Define("Redis CA", "redis-ca", "REDIS_CA", "PEM file of the CAs that sign the Redis servers' certificates (rediss)", config.OptionalText(&o.CA, readable)),
		config.Define("Redis client certificate", "redis-cert", "REDIS_CERT", "PEM file of a client certificate, with -redis-key", config.OptionalText(&o.Cert, readable)),
		config.Define("Redis client key", "redis-key", "REDIS_KEY", "PEM file of the client certificate's key", config.OptionalText(&o.Key, readable)),
	}
}

func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, errors.Unwrap(err))
	}
	return f.Close()
}

// Check reports the options that do not go together.
func (o Options) Check() []error {
	var errs []error
	if o.User != "" && o.Password == "" {
		errs = append(errs, errors.New("a Redis user (-redis-user, REDIS_USERNAME) needs a password (-redis-password, REDIS_PASSWORD)"))
	}
	if (o.Cert == "") != (o.Key == "") {
		errs = append(errs, errors.New("a Redis client certificate (-redis-cert, REDIS_CERT) needs its key (-redis-key, REDIS_KEY), and a key its certificate"))
	}
	if t, err := parse(o.URL); err == nil && !t.tls && (o.CA != "" || o.Cert != "") {
		errs = append(errs, errors.New("the Redis TLS files (-redis-ca, -redis-cert) need a rediss URL (REDIS_URL=rediss://…)"))
	}
	return errs
}

// FailsOver says whether the URL names a topology whose masters fail over to replicas
// (Cluster, Sentinel): Redis replicates asynchronously, so a failover can lose writes the old
// master acknowledged.
func (o Options) FailsOver() bool {
	t, err := parse(o.URL)
	return err == nil && t.kind != "server"
}

// LogValue is what may be logged: the URL without its password, the topology, the files.
func (o Options) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("url", Redact(o.URL))}
	if o.Password != "" {
		attrs = append(attrs, slog.String("user", o.User), slog.String("password", "xxxxx"))
	}
	if o.PasswordFile != "" {
		attrs = append(attrs, slog.String("password_file", o.PasswordFile))
	}
	if t, err := parse(o.URL); err == nil {
		attrs = append(attrs, slog.String("topology", t.kind))
	}
	if o.CA != "" {
		attrs = append(attrs, slog.String("ca", o.CA))
	}
	if o.Cert != "" {
		attrs = append(attrs, slog.String("cert", o.Cert))
	}
	return slog.GroupValue(attrs...)
}

// Redact masks the passwords of a Redis URL of any of the forms (config.RedactURLs would split
// the hosts of a cluster or sentinel URL at their commas): the user's, whatever it holds (a
// base64 password written unencoded has '/' and '+'), and a sentinel_password in the query.
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return config.RedactURLs(raw)
	}
	rest = queryPassword.ReplaceAllString(rest, "${1}xxxxx")
	// The userinfo ends at the last '@': a password may hold '/', '?' or ':', the hosts, the
	// master's name and the database do not hold '@', and the query's passwords are masked.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return scheme + "://" + rest
	}
	if user, _, hasPassword := strings.Cut(rest[:at], ":"); hasPassword && !strings.ContainsAny(user, "/?#") {
		return scheme + "://" + user + ":xxxxx" + rest[at:]
	}
	return scheme + "://xxxxx" + rest[at:]
}

// queryPassword is a query parameter whose name ends in "password" (sentinel_password), up to
// the next parameter.
var queryPassword = regexp.MustCompile(`(?i)([?&][a-z_]*password=)[^&]*`)

// topology is a parsed URL.
type topology struct {
	kind               string // "server", "cluster", "sentinel"
	tls                bool
	addrs              []string
	user, password     string
	master             string
	db                 int
	sentinelUser, sPwd string
	query              url.Values
	serverURL          string // the one-server URL as go-redis parses it
}

func checkURL(v string) error {
	_, err := parse(v)
	return err
}

func parse(raw string) (topology, error) {
	var t topology
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return t, fmt.Errorf("%q: want redis://, rediss://, redis+cluster:// or redis+sentinel://", Redact(raw))
	}
	base, kind, _ := strings.Cut(scheme, "+")
	switch base {
	case "redis":
	case "rediss":
		t.tls = true
	default:
		return t, fmt.Errorf("%q: scheme must be redis or rediss, alone or with +cluster or +sentinel", Redact(raw))
	}
	switch kind {
	case "":
		t.kind = "server"
		if strings.Contains(rest, ",") {
			return t, errors.New("one server only in a redis:// URL: for several, use redis+cluster:// or redis+sentinel://")
		}
		if _, err := redis.ParseURL(raw); err != nil {
			return t, fmt.Errorf("%q: %w", Redact(raw), config.URLReason(raw, err))
		}
		t.serverURL = raw
		return t, nil
	case "cluster", "sentinel":
		t.kind = kind
	default:
		return t, fmt.Errorf("%q: unknown topology %q (cluster or sentinel)", Redact(raw), kind)
	}
	// Several hosts do not make a valid URL host: read user, hosts, path and query by hand.
	rest, query, _ := strings.Cut(rest, "?")
	hostPart, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hostPart, "@"); at >= 0 {
		ui, err := url.Parse("x://" + hostPart[:at+1] + "h")
		if err != nil || ui.User == nil {
			return t, errors.New("the user and password of the Redis URL do not parse")
		}
		t.user = ui.User.Username()
		t.password, _ = ui.User.Password()
		hostPart = hostPart[at+1:]
	}
	for _, h := range strings.Split(hostPart, ",") {
		if h = strings.TrimSpace(h); h == "" || !strings.Contains(h, ":") {
			return t, fmt.Errorf("%q: each host must be host:port", Redact(raw))
		}
		t.addrs = append(t.addrs, strings.TrimSpace(h))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return t, fmt.Errorf("the query of the Redis URL: %w", err)
	}
	t.query = q
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if kind == "sentinel" {
		if parts[0] == "" {
			return t, fmt.Errorf("%q: name the master: redis+sentinel://host:port,…/<master>/<db>", Redact(raw))
		}
		t.master = parts[0]
		parts = parts[1:]
		t.sentinelUser, t.sPwd = q.Get("sentinel_user"), q.Get("sentinel_password")
	}
	if len(parts) > 0 && parts[0] != "" {
		if kind == "cluster" {
			return t, errors.New("a Redis Cluster has one database: no /db in a redis+cluster:// URL")
		}
		if t.db, err = strconv.Atoi(parts[0]); err != nil {
			return t, fmt.Errorf("%q: the database must be a number", Redact(raw))
		}
	}
	return t, nil
}

// clusterTries is how many times a cluster command is tried after its first: with the
// backoff below, about 7 s, a Redis Cluster's failover at a short node timeout; a longer
// failover fails the command, and the planner's loops try again.
const clusterTries = 16

// clusterReload is how often a cluster client reads the slot map again: a failover is seen
// this soon after the cluster agrees on it.
const clusterReload = time.Second

// Client builds the client; it connects on first use, so a Redis that is not up yet shows in
// readiness rather than failing the start. Every form holds to its caller's deadline
// (ContextTimeoutEnabled): without it, go-redis looked at the context only between tries, so a
// call to a server that hangs (connections open, nothing answering) waited out the read
// time-out of each try, whatever deadline the lease or the dispatch had given it.
//
// A client certificate (Cert, Key) is read again when its files change (certfile), so a
// renewed one is used from the next connection on; logger (nil: none) hears of each renewal,
// read or not readable. So is a password read from a file (PasswordFile): each new connection
// authenticates with the file's password of the moment.
func (o Options) Client(name string, logger *slog.Logger) (redis.UniversalClient, error) {
	t, err := parse(o.URL)
	if err != nil {
		return nil, err
	}
	if o.Password != "" {
		t.user, t.password = o.User, o.Password
	}
	var tlsConfig *tls.Config
	var roots *reload.Value[*x509.CertPool]
	if t.tls {
		if tlsConfig, roots, err = o.tlsConfig(logger); err != nil {
			return nil, err
		}
	}
	credentials, err := o.credentials(logger)
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: t.addrs, Username: t.user, Password: t.password, TLSConfig: tlsConfig, ClientName: name,
			// A master lost: the cluster client retries for about 7 s, picking the slot's
			// master again from the slot map at each try, so a command goes to the promoted
			// replica within a try of the map showing it. The retries are the cluster
			// client's alone (go-redis's default): retries of each node's own client, and
			// its five dials a try, went on knocking at the dead master, so a command
			// begun just after the loss came back 10 to 13.5 s after the promotion
			// (docs/scaling.md).
			MaxRedirects: clusterTries, MinRetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 500 * time.Millisecond,
			DialTimeout: 2 * time.Second, DialerRetries: 1, Dialer: dialer(tlsConfig, roots, 2*time.Second),
			// The slot map is read again this often (go-redis: every minute), so a replica
			// promoted after its master died is used within seconds, not a minute.
			ClusterStateReloadInterval: clusterReload,
			ContextTimeoutEnabled:      true,
			NewClient:                  newClusterNode,
			CredentialsProviderContext: credentials,
		}), nil
	case "sentinel":
		sentinelUser, sentinelPassword := t.user, t.password
		if t.sentinelUser != "" || t.sPwd != "" {
			sentinelUser, sentinelPassword = t.sentinelUser, t.sPwd
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: t.master, SentinelAddrs: t.addrs, DB: t.db,
			Username: t.user, Password: t.password, SentinelUsername: sentinelUser, SentinelPassword: sentinelPassword,
			TLSConfig: tlsConfig, ClientName: name,
			MaxRetries: 6, MinRetryBackoff: 100 * time.Millisecond, MaxRetryBackoff: time.Second, DialTimeout: 2 * time.Second,
			Dialer:                dialer(tlsConfig, roots, 2*time.Second),
			ContextTimeoutEnabled: true,
			// The data nodes' connections; the sentinels are asked with the password read at
			// start.
			CredentialsProviderContext: credentials,
		}), nil
	}
	opts, err := redis.ParseURL(t.serverURL)
	if err != nil {
		return nil, fmt.Errorf("Redis URL %s: %w", Redact(o.URL), config.URLReason(t.serverURL, err))
	}
	opts.ClientName = name
	opts.ContextTimeoutEnabled = true
	if o.Password != "" {
		opts.Username, opts.Password = o.User, o.Password
	}
	opts.CredentialsProviderContext = credentials
	if tlsConfig != nil {
		if opts.TLSConfig != nil {
			tlsConfig.ServerName = opts.TLSConfig.ServerName
		}
		opts.TLSConfig = tlsConfig
		opts.Dialer = dialer(tlsConfig, roots, cmp.Or(opts.DialTimeout, 5*time.Second)) // go-redis's default
	}
	return redis.NewClient(opts), nil
}

// credentials is go-redis's provider of a password file's user and password, read at each
// new connection and again only when the file changed (reload); nil without a file, which
// leaves go-redis the password given.
func (o Options) credentials(logger *slog.Logger) (func(context.Context) (string, string, error), error) {
	if o.PasswordFile == "" || o.Password == "" {
		return nil, nil
	}
	password, err := reload.NewText(o.PasswordFile, reload.Logged(logger, "the Redis password file"))
	if err != nil {
		return nil, fmt.Errorf("Redis password: %w", err)
	}
	user := o.User
	return func(context.Context) (string, string, error) { return user, password.Get(), nil }, nil
}

// tlsConfig is the TLS of a rediss URL: the system's CAs, or those of the CA file, and the
// client certificate when given, read again when its files change. The CA file is read again
// when it changes too: roots (nil without a CA file) is then what dialer verifies with.
func (o Options) tlsConfig(logger *slog.Logger) (c *tls.Config, roots *reload.Value[*x509.CertPool], err error) {
	c = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CA != "" {
		roots, err = reload.New(func() (*x509.CertPool, error) {
			pem, err := os.ReadFile(o.CA)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s: no PEM certificate in it", o.CA)
			}
			return pool, nil
		}, reload.Logged(logger, "the Redis CA file"), o.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("Redis CA: %w", err)
		}
		c.RootCAs = roots.Get()
	}
	if o.Cert != "" {
		pair, err := certfile.Load(o.Cert, o.Key, reload.Logged(logger, "the Redis client certificate"))
		if err != nil {
			return nil, nil, fmt.Errorf("Redis client certificate: %w", err)
		}
		c.GetClientCertificate = pair.GetClientCertificate
	}
	return c, roots, nil
}

// dialer is go-redis's dialer where a CA file is given (nil otherwise, go-redis's own): it
// makes each connection's TLS configuration with the CAs as the file holds them then, so a
// Redis certificate of a new CA is trusted from the next connection on. crypto/tls reads
// RootCAs once, and go-redis shares one configuration among its connections. The rest is as
// go-redis dials: the time-out, TCP keep-alives, the server name from the address when the
// configuration has none.
func dialer(base *tls.Config, roots *reload.Value[*x509.CertPool], timeout time.Duration) func(context.Context, string, string) (net.Conn, error) {
	if roots == nil {
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := base.Clone()
		c.RootCAs = roots.Get()
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout, KeepAliveConfig: keepAlive}, Config: c}
		return d.DialContext(ctx, network, addr)
	}
}

// keepAlive is go-redis's own TCP keep-alive setting.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}
