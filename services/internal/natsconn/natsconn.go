// Package natsconn opens resched's NATS connections: a service's (planner, worker), which never
// gives up reconnecting and tells its health, and schedctl's, which connects once. One Options
// holds every way a production NATS asks a client to prove who it is: user and password or a
// token (in the URL or apart), a .creds file (operator mode), an nkey seed, TLS with a private
// CA, a client certificate; and a custom inbox prefix for a user whose permissions allow only
// its own replies. A service's connection also ends a request in flight when it is lost
// (request.go) and leaves a server through which JetStream cannot be reached (watch.go).
package natsconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/internal/reload"
)

// Options say how to reach NATS and who to be there.
type Options struct {
	URL         string // one server or a comma-separated list
	User        string // with Password, instead of credentials in the URL
	Password    string
	Token       string
	Creds       string // a .creds file: a user JWT and its nkey seed (operator mode)
	NKey        string // a file holding an nkey seed
	CA          string // PEM file of the CAs that sign the servers' certificates
	Cert, Key   string // PEM files of a client certificate and its key (mutual TLS)
	InboxPrefix string // replies come on <InboxPrefix>.…; default _INBOX
	// JSDomain is the JetStream domain the streams live in (JetStream's API on
	// $JS.<domain>.API), for a service connected to a leaf node whose hub holds them; empty:
	// the JetStream of the server connected to.
	JSDomain string
	// PasswordFile and TokenFile are the files Password and Token were read from
	// (NATS_PASSWORD_FILE, NATS_TOKEN_FILE), read again at each connection attempt, as a
	// .creds file is, so a secret rotated in place is picked up without a restart.
	PasswordFile, TokenFile string
	// AuthGrace is how long a service that was connected keeps trying credentials the server
	// refuses before its liveness fails; 0: DefaultAuthGrace.
	AuthGrace time.Duration
	// PingInterval is how often the connection pings its server; a server that leaves two
	// pings unanswered is given up and another tried. 0: DefaultPingInterval.
	PingInterval time.Duration
}

// Settings are the options as settings of a service: the flags -nats-url, -nats-user,
// -nats-password, -nats-token, -nats-creds, -nats-nkey, -nats-ca, -nats-cert, -nats-key,
// -nats-inbox-prefix and the variables the NATS tooling reads (NATS_URL, NATS_USER,
// NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_NKEY, NATS_CA, NATS_CERT, NATS_KEY), plus
// NATS_INBOX_PREFIX.
func (o *Options) Settings() []config.Setting {
	none := func(string) error { return nil }
	return []config.Setting{
		config.Define("NATS URL", "nats-url", "NATS_URL", "NATS server URL, or a comma-separated list", config.Text(&o.URL, config.NATSURLs)),
		config.Define("NATS user", "nats-user", "NATS_USER", "user name, with -nats-password (or in the URL)", config.OptionalText(&o.User, none)),
		config.Define("NATS password", "nats-password", "NATS_PASSWORD", "password of -nats-user", config.Secret(&o.Password, &o.PasswordFile, none)),
		config.Define("NATS token", "nats-token", "NATS_TOKEN", "authentication token", config.Secret(&o.Token, &o.TokenFile, none)),
		config.Define("NATS credentials", "nats-creds", "NATS_CREDS", "a .creds file (user JWT and seed, operator mode); read again at each reconnect, so a rotated file is picked up", config.OptionalText(&o.Creds, readable)),
		config.Define("NATS nkey", "nats-nkey", "NATS_NKEY", "a file holding an nkey seed", config.OptionalText(&o.NKey, readable)),
		config.Define("NATS CA", "nats-ca", "NATS_CA", "PEM file of the CAs that sign the NATS servers' certificates", config.OptionalText(&o.CA, readable)),
		config.Define("NATS client certificate", "nats-cert", "NATS_CERT", "PEM file of a client certificate (mutual TLS), with -nats-key", config.OptionalText(&o.Cert, readable)),
		config.Define("NATS client key", "nats-key", "NATS_KEY", "PEM file of the client certificate's key", config.OptionalText(&o.Key, readable)),
		config.Define("NATS JetStream domain", "nats-js-domain", "NATS_JS_DOMAIN", "JetStream domain of the streams (a leaf node's hub, for example); default the connected server's own", config.OptionalText(&o.JSDomain, checkDomain)),
		config.Define("NATS inbox prefix", "nats-inbox-prefix", "NATS_INBOX_PREFIX", "subject prefix of this service's reply inboxes (default _INBOX), for a user allowed only its own", config.OptionalText(&o.InboxPrefix, config.SubjectPrefix)),
		config.Define("NATS ping interval", "nats-ping-interval", "NATS_PING_INTERVAL", "how often the connection pings its server; a server that leaves two unanswered is given up for another (raise it for a link whose round trip nears a second)", config.Duration(&o.PingInterval, 100*time.Millisecond)),
	}
}

func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, errors.Unwrap(err))
	}
	return f.Close()
}

// Check reports the options that do not go together; each names its flags and variables.
func (o Options) Check() []error {
	var errs []error
	both := func(ok bool, msg string) {
		if ok {
			errs = append(errs, errors.New(msg))
		}
	}
	both(o.Creds != "" && o.NKey != "", "NATS credentials (-nats-creds, NATS_CREDS) and an nkey (-nats-nkey, NATS_NKEY) exclude each other")
	both((o.User == "") != (o.Password == ""), "a NATS user (-nats-user, NATS_USER) needs a password (-nats-password, NATS_PASSWORD), and a password a user")
	both(o.Token != "" && o.User != "", "a NATS token (-nats-token, NATS_TOKEN) and a user (-nats-user, NATS_USER) exclude each other")
	both((o.Cert == "") != (o.Key == ""), "a NATS client certificate (-nats-cert, NATS_CERT) needs its key (-nats-key, NATS_KEY), and a key its certificate")
	return errs
}

// Identity is who the options make the client, for logs and messages; never a secret.
func (o Options) Identity() string {
	switch {
	case o.Creds != "":
		if claims, err := credsUser(o.Creds); err == nil {
			return fmt.Sprintf("user %q (%s) from %s", claims.Name, claims.Subject, o.Creds)
		}
		return "the user of " + o.Creds
	case o.NKey != "":
		if seed, err := os.ReadFile(o.NKey); err == nil {
			if kp, err := nkeys.FromSeed(bytesTrim(seed)); err == nil {
				if pub, err := kp.PublicKey(); err == nil {
					return "nkey " + pub
				}
			}
		}
		return "the nkey of " + o.NKey
	case o.User != "":
		return fmt.Sprintf("user %q", o.User)
	case o.Token != "":
		return "a token"
	}
	if u := urlUser(o.URL); u != nil {
		if _, hasPassword := u.Password(); hasPassword {
			return fmt.Sprintf("user %q (from the URL)", u.Username())
		}
		return "a token (from the URL)"
	}
	return "no credentials"
}

func bytesTrim(b []byte) []byte { return []byte(strings.TrimSpace(string(b))) }

// credsUser reads the user JWT of a .creds file.
func credsUser(path string) (*jwt.UserClaims, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return nil, err
	}
	return jwt.DecodeUserClaims(token)
}

// LogValue is what may be logged of the options: the URLs without their secrets, and the
// files and names, never a password, token or seed.
func (o Options) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("url", config.RedactURLs(o.URL)), slog.String("identity", o.Identity()),
		slog.String("ping_interval", cmp.Or(o.PingInterval, DefaultPingInterval).String())}
	for k, v := range map[string]string{"ca": o.CA, "cert": o.Cert, "inbox_prefix": o.InboxPrefix, "password_file": o.PasswordFile, "token_file": o.TokenFile, "js_domain": o.JSDomain} {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	return slog.GroupValue(attrs...)
}

// clientOptions are the nats.go options of the identity, TLS and inbox. logger (nil: none)
// hears of each rotation of a password or token file.
func (o Options) clientOptions(logger *slog.Logger) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case o.Creds != "":
		opts = append(opts, nats.UserCredentials(o.Creds)) // read again at every connect
	case o.NKey != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKey)
		if err != nil {
			return nil, fmt.Errorf("NATS nkey %s: %w", o.NKey, err)
		}
		opts = append(opts, opt)
	}
	// Credentials in the URL win (nats.go uses them before the options'); beside them a token
	// handler would make nats.go refuse to connect, so none is given.
	if o.User != "" {
		password, err := secret(o.Password, o.PasswordFile, "NATS password", logger)
		if err != nil {
			return nil, err
		}
		user := o.User
		opts = append(opts, nats.UserInfoHandler(func() (string, string) { return user, password() }))
	}
	if o.Token != "" && urlUser(o.URL) == nil {
		token, err := secret(o.Token, o.TokenFile, "NATS token", logger)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.TokenHandler(token))
	}
	if o.CA != "" {
		opts = append(opts, nats.RootCAs(o.CA))
	}
	if o.Cert != "" {
		opts = append(opts, nats.ClientCert(o.Cert, o.Key))
	}
	if o.CA != "" || o.Cert != "" {
		opts = append(opts, nats.Secure())
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	return opts, nil
}

// checkDomain accepts a JetStream domain: a subject token.
func checkDomain(d string) error {
	if strings.ContainsAny(d, ".*> \t") {
		return fmt.Errorf("%q: a JetStream domain is one subject token (no dot, space, * or >)", d)
	}
	return nil
}

// JetStream is the JetStream of the options' domain over nc.
func (o Options) JetStream(nc *nats.Conn, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	if o.JSDomain != "" {
		return jetstream.NewWithDomain(nc, o.JSDomain, opts...)
	}
	return jetstream.New(nc, opts...)
}

// JetStreamAPI is the subject prefix of JetStream's API in the options' domain, for a request
// made without the jetstream package: $JS.API, or $JS.<domain>.API.
func (o Options) JetStreamAPI() string {
	if o.JSDomain != "" {
		return "$JS." + o.JSDomain + ".API"
	}
	return "$JS.API"
}

// secret is a password or token as nats.go asks for it at each connection attempt: value, or
// the file it was read from (file), read again when it changed.
func secret(value, file, what string, logger *slog.Logger) (func() string, error) {
	if file == "" {
		return func() string { return value }, nil
	}
	v, err := reload.NewText(file, reload.Logged(logger, "the "+what+" file"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v.Get, nil
}

// urlUser is the credentials of the first URL of the list that carries some (nil: none).
func urlUser(list string) *url.Userinfo {
	for _, raw := range strings.Split(list, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			return u.User
		}
	}
	return nil
}

// DefaultAuthGrace is how long a service that was connected keeps trying credentials the
// server has begun to refuse before its liveness fails, so that an orchestrator restarts it
// with the credentials of the day: long enough for a rotated .creds file to reach the pod (a
// mounted Secret is refreshed within about a minute) and be picked up, or for a server
// configuration reloaded by mistake to be put right.
const DefaultAuthGrace = 2 * time.Minute

// Conn is a service's connection. It never gives up reconnecting, whatever the server says:
// a refused credential is logged as an authorization violation, and the liveness check fails
// at once when the service has never been let in (its configuration is wrong), or after
// AuthGrace when a server that let it in refuses it now (a rotation under way).
type Conn struct {
	*nats.Conn
	closed    chan struct{}
	identity  string
	grace     time.Duration
	draining  atomic.Bool
	connected atomic.Bool  // it has been let in at least once
	authSince atomic.Int64 // when the server began refusing the credentials (unix ns); 0: it does not
	authLogs  atomic.Int64 // when a refusal was last logged (unix ns), to log a refusal loop sparsely

	log        *slog.Logger
	unanswered atomic.Int32 // requests in a row that no responder took (request.go)

	mu      sync.Mutex
	lastErr error
	lost    chan struct{} // closed at the next disconnection (request.go)
}

// A connection whose server stops answering (it hangs, or the network drops packets without a
// reset) is given up after maxPingsOut pings unanswered, DefaultPingInterval apart, and the
// client reconnects, to another server of a cluster. With nats.go's defaults (2 min, 2) a
// planner kept such a connection for minutes, its leases too, and published nothing: its jobs
// waited until the link came back (docs/operations.md). A ping a second costs nothing; no
// connection went stale in bursts of 100,000 fires on two loaded cores.
const (
	DefaultPingInterval = time.Second
	maxPingsOut         = 2
)

// Connect connects without waiting for a server: a service may start before NATS (a compose
// file, a Kubernetes rollout) and keeps reconnecting for as long as it runs.
func Connect(o Options, name string, logger *slog.Logger) (*Conn, error) {
	c := &Conn{closed: make(chan struct{}), lost: make(chan struct{}), identity: o.Identity(), grace: o.AuthGrace, log: logger}
	if c.grace <= 0 {
		c.grace = DefaultAuthGrace
	}
	opts, err := o.clientOptions(logger)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.PingInterval(cmp.Or(o.PingInterval, DefaultPingInterval)), nats.MaxPingsOutstanding(maxPingsOut),
		nats.ConnectHandler(func(nc *nats.Conn) {
			c.letIn()
			logger.Info("nats connected", "server", config.RedactURLs(nc.ConnectedUrl()), "as", c.identity)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.disconnected()
			if err == nil { // closed by this process (its stop drains it), not lost
				logger.Info("nats connection closed")
				return
			}
			c.note(logger, err)
			logger.Warn("nats disconnected", "error", err)
		}),
		// A failed first connection (a refusal included) is told here, not to the ErrorHandler.
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { c.note(logger, err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.letIn()
			logger.Info("nats reconnected", "server", config.RedactURLs(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			if !c.note(logger, err) {
				logger.Error("nats error", "subject", subject, "error", err)
			}
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				c.setErr(err)
			}
			close(c.closed)
		}),
		// A refusal is worth retrying: a .creds file is read again at each attempt, and a
		// server's configuration may be put right; liveness says when to give up.
		nats.IgnoreAuthErrorAbort(),
	)
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s as %s: %w", config.RedactURLs(o.URL), c.identity, err)
	}
	c.Conn = nc
	if nc.IsConnected() {
		// A connection made inside Connect does not call the ConnectHandler.
		c.letIn()
		logger.Info("nats connected", "server", config.RedactURLs(nc.ConnectedUrl()), "as", c.identity)
	}
	return c, nil
}

func (c *Conn) letIn() {
	c.connected.Store(true)
	c.authSince.Store(0)
	c.authLogs.Store(0)
}

// authLogEvery spaces the log lines of a refusal loop (one attempt a second).
const authLogEvery = 30 * time.Second

// note records an error; an authorization failure is logged as such, with who was refused
// (the first of a loop of refusals, then one every authLogEvery). It reports whether the
// error was an authorization failure.
func (c *Conn) note(logger *slog.Logger, err error) bool {
	c.setErr(err)
	if !IsAuthError(err) {
		return false
	}
	now := time.Now().UnixNano()
	c.authSince.CompareAndSwap(0, now)
	if last := c.authLogs.Load(); now-last >= int64(authLogEvery) && c.authLogs.CompareAndSwap(last, now) {
		logger.Error("nats authorization violation: the server refused this service's credentials; retrying",
			"as", c.identity, "error", err, "refused_for", time.Duration(now-c.authSince.Load()).Round(time.Second).String())
	}
	return true
}

func (c *Conn) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr = err
}

// Err is the last error the connection met.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Closed is closed once the connection is closed for good: after Drain or Close.
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// Drain drains the connection at a stop; a close that follows is not a failure.
func (c *Conn) Drain() error {
	c.draining.Store(true)
	return c.Conn.Drain()
}

// Live is the liveness of the connection: it fails when the connection is closed for good
// and not by a stop, when the server refuses credentials it has never accepted, and when it
// has refused them for longer than AuthGrace.
func (c *Conn) Live(context.Context) error {
	select {
	case <-c.closed:
		if !c.draining.Load() {
			return fmt.Errorf("the NATS connection is closed for good (%v)", c.Err())
		}
	default:
	}
	since := c.authSince.Load()
	switch {
	case since == 0:
	case !c.connected.Load():
		return fmt.Errorf("NATS refuses the credentials of %s (authorization violation): %v", c.identity, c.Err())
	case time.Since(time.Unix(0, since)) > c.grace:
		return fmt.Errorf("NATS has refused the credentials of %s for more than %v (authorization violation): %v", c.identity, c.grace, c.Err())
	}
	return nil
}

// Ready is the readiness of the connection.
func (c *Conn) Ready(context.Context) error {
	if s := c.Status(); s != nats.CONNECTED {
		return fmt.Errorf("not connected (%s)", s)
	}
	return nil
}

// IsAuthError reports whether err says the server refused the client's credentials.
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrAccountAuthExpired) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "authorization violation") || strings.Contains(s, "authentication")
}

// Dial connects once, for a command: no reconnection, a time-out. errs receives the errors the
// server reports later (a permissions violation), so a command can say why a request failed.
func Dial(o Options, name string, timeout time.Duration, errs func(error)) (*nats.Conn, error) {
	opts, err := o.clientOptions(nil)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(name), nats.Timeout(timeout), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errs != nil {
				errs(err)
			}
		}))
	return nats.Connect(o.URL, opts...)
}
