// Package httpaction delivers Http and Https actions: the configured method, URI, headers and
// body, with Basic, ClientCertificate or ActiveDirectoryOAuth authentication, and the
// scheduler's identity headers (docs/nats-api.md, "What a target receives"). A 2xx answer is a
// success; any other answer, a transport error or the time-out is a retryable failure; an
// action that can never be sent (no request, a bad URI or method, an unreadable certificate)
// fails permanently. The history message summarises the answer in the original service's
// format (reference, section 6.8). Redirects are followed without handing the action's
// credentials to another origin (checkRedirect), and no connection is made to an address of
// Options.DenyNetworks (guard), which fails the attempt permanently.
//
// Connections are kept alive: one transport serves every action without a client
// certificate (plain-http targets through package plainhttp, the others through net/http),
// and one transport per certificate serves the others, kept in a bounded cache.
// Nothing here logs, and no secret of an action reaches a message or an error.
package httpaction

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/httpaction/plainhttp"
	"github.com/resched/resched/shared/job"
)

// The headers every delivery carries (reference, section 6.11).
const (
	HeaderJobID             = "x-ms-scheduler-jobid"
	HeaderJobCollectionID   = "x-ms-scheduler-jobcollectionid"
	HeaderExpectedExecution = "x-ms-scheduler-expected-execution-time"
	HeaderExecutionTag      = "x-ms-scheduler-execution-tag"
	HeaderClientRequestID   = "x-ms-client-request-id"
)

// The same in the canonical form net/http keeps them in: set directly, the header map spends
// nothing on canonicalising (an allocation per header per delivery).
const (
	canonicalJobID             = "X-Ms-Scheduler-Jobid"
	canonicalJobCollectionID   = "X-Ms-Scheduler-Jobcollectionid"
	canonicalExpectedExecution = "X-Ms-Scheduler-Expected-Execution-Time"
	canonicalExecutionTag      = "X-Ms-Scheduler-Execution-Tag"
	canonicalClientRequestID   = "X-Ms-Client-Request-Id"
)

// Defaults of Options.
const (
	DefaultTimeout         = 60 * time.Second
	DefaultOAuthAuthority  = "https://login.microsoftonline.com"
	DefaultMaxCertificates = 64
	userAgent              = "resched-worker"
)

// Options configure a Deliverer. The zero value is the production configuration.
type Options struct {
	// Timeout bounds one attempt, the token request included; default 60 s.
	Timeout time.Duration
	// OAuthAuthority is where ActiveDirectoryOAuth tokens come from:
	// <authority>/<tenant>/oauth2/token. Default https://login.microsoftonline.com.
	OAuthAuthority string
	// RootCAs are the authorities trusted for HTTPS targets; nil means the system's.
	RootCAs *x509.CertPool
	// MaxCertificates bounds the client certificates kept decoded with their connections;
	// default 64.
	MaxCertificates int
	// Clock tells the time for token expiry; default time.Now.
	Clock func() time.Time
	// DenyNetworks are the addresses no request may connect to (ParseNetworks); nil means
	// DefaultDenyNetworks, an empty list none.
	DenyNetworks []netip.Prefix
}

// Deliverer delivers HTTP actions. It is safe for concurrent use.
type Deliverer struct {
	timeout time.Duration
	client  *http.Client // actions without a client certificate
	certs   *certCache
	tokens  *tokenCache
}

// New returns a Deliverer with its shared transport.
func New(o Options) *Deliverer {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.OAuthAuthority == "" {
		o.OAuthAuthority = DefaultOAuthAuthority
	}
	if o.MaxCertificates <= 0 {
		o.MaxCertificates = DefaultMaxCertificates
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.DenyNetworks == nil {
		o.DenyNetworks, _ = ParseNetworks(DefaultDenyNetworks)
	}
	base := newTransport(o.RootCAs, guard{o.DenyNetworks})
	// Plain-http requests go on the caller's goroutine, the others through base.
	plain := plainhttp.New(plainhttp.Options{Dial: base.DialContext, Proxy: base.Proxy, Fallback: base})
	client := newClient(plain)
	return &Deliverer{
		timeout: o.Timeout,
		client:  client,
		certs:   newCertCache(base, o.MaxCertificates),
		tokens:  newTokenCache(client, o.OAuthAuthority, o.Clock),
	}
}

// newTransport is the shared transport: keep-alive with enough idle connections for a busy
// worker calling a few hosts often, and no connection the guard refuses.
func newTransport(rootCAs *x509.CertPool, g guard) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// net/http's own dialer settings, with the guard.
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}).DialContext
	// No Accept-Encoding, as the original service's client: an answer is read as the target sends
	// it, by this transport and by the one of plain-http targets alike.
	t.DisableCompression = true
	t.MaxIdleConns = 512
	t.MaxIdleConnsPerHost = 64
	t.TLSClientConfig = &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}
	return t
}

// newClient is a client of the transport with the redirect policy (checkRedirect).
func newClient(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, CheckRedirect: checkRedirect}
}

// Close releases idle connections.
func (d *Deliverer) Close() {
	d.client.CloseIdleConnections()
	d.certs.close()
}

// Deliver sends one attempt of the action's request.
func (d *Deliverer) Deliver(ctx context.Context, a *job.ActionSpec, m action.Meta) (string, error) {
	if a == nil || a.Request == nil {
		return "", action.Permanent(errors.New("http action without a request"))
	}
	r := a.Request
	u, err := parseURI(r.URI)
	if err != nil {
		return "", action.Permanent(err)
	}
	host := u.Hostname()
	ctx, cancel := action.Bounded(ctx, d.timeout)
	defer cancel()

	client, err := d.clientFor(r.Authentication)
	if err != nil {
		return failure(host, err)
	}
	req, err := newRequest(ctx, r, u, m)
	if err != nil {
		return failure(host, action.Permanent(err))
	}
	if err := d.authenticate(ctx, req, r.Authentication); err != nil {
		return failure(host, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if denied(err) { // the same address is refused again at every retry
			return failure(host, action.Permanent(transportError(ctx, err)))
		}
		return failure(host, transportError(ctx, err))
	}
	secrets := sentSecrets(req, basicPassword(r.Authentication))
	msg := summarise(host, resp, secrets)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return msg, fmt.Errorf("host %s answered %s", host, redactString(statusText(resp), secrets))
	}
	return msg, nil
}

// parseURI accepts absolute http and https URIs with a host.
func parseURI(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the URI, whose query may hold a signature: keep only the reason.
		return nil, fmt.Errorf("request uri is not a URI: %w", unwrapURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("request uri: scheme %q is not http or https", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("request uri has no host")
	}
	return u, nil
}

// clientFor picks the client of the action's authentication: the shared one, or the one of
// its client certificate.
func (d *Deliverer) clientFor(a *job.HTTPAuthentication) (*http.Client, error) {
	if a == nil || a.Type != job.AuthClientCertificate {
		return d.client, nil
	}
	return d.certs.client(a.Pfx, a.Password)
}

// newRequest builds the request: the user's headers, then the scheduler's, which win.
func newRequest(ctx context.Context, r *job.HTTPRequest, u *url.URL, m action.Meta) (*http.Request, error) {
	method := strings.ToUpper(strings.TrimSpace(r.Method))
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	// The URL is the one parseURI checked: printing it for NewRequest to parse again cost a
	// tenth of a delivery.
	req, err := http.NewRequestWithContext(ctx, method, "/", body)
	if err != nil {
		return nil, fmt.Errorf("request method %q: %w", method, unwrapURLError(err))
	}
	req.URL, req.Host = u, strings.TrimSuffix(u.Host, ":") // as NewRequest sets them
	req.Header["User-Agent"] = []string{userAgent}
	for name, value := range r.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("request header name %q is not a valid HTTP header name", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("request header %s: value holds a line break or NUL", name)
		}
		switch {
		case strings.EqualFold(name, "Host"):
			req.Host = value
		case strings.EqualFold(name, "Content-Length"):
			// The body decides its length.
		default:
			req.Header.Set(name, value)
		}
	}
	req.Header[canonicalJobID] = []string{m.Job}
	req.Header[canonicalJobCollectionID] = []string{m.Collection}
	req.Header[canonicalExpectedExecution] = []string{m.ExpectedExecutionTime()}
	req.Header[canonicalExecutionTag] = []string{m.ExecutionTag}
	if m.ClientRequestID != "" {
		req.Header[canonicalClientRequestID] = []string{m.ClientRequestID}
	}
	return req, nil
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// authenticate adds the Authorization header of Basic and ActiveDirectoryOAuth; a client
// certificate is presented by its transport instead.
func (d *Deliverer) authenticate(ctx context.Context, req *http.Request, a *job.HTTPAuthentication) error {
	if a == nil {
		return nil
	}
	switch a.Type {
	case "", job.AuthNotSpecified, job.AuthClientCertificate:
		return nil
	case job.AuthBasic:
		req.SetBasicAuth(a.Username, a.Password)
		return nil
	case job.AuthActiveDirectoryOAuth:
		token, err := d.tokens.token(ctx, a)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
	return action.Permanent(fmt.Errorf("authentication type %q is not supported", a.Type))
}

// basicPassword is the password of Basic authentication, which the target receives.
func basicPassword(a *job.HTTPAuthentication) string {
	if a == nil || a.Type != job.AuthBasic {
		return ""
	}
	return a.Password
}

// transportError says why no answer came, without the request URI (its query may hold a
// signature): the time-out, a cancellation or the network error.
func transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("timed out before the target answered: %w", context.DeadlineExceeded)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("the attempt was cancelled: %w", context.Canceled)
	}
	if errors.As(err, new(x509.UnknownAuthorityError)) {
		// A private CA is the usual cause, and the way out is the workers' setting: say so
		// where the job's owner looks.
		return fmt.Errorf("%w (a private CA is trusted through the workers' RESCHED_WORKER_TARGET_CA)", unwrapURLError(err))
	}
	return unwrapURLError(err)
}

// failure is the message and the error of an attempt that got no answer.
func failure(host string, err error) (string, error) {
	return "Http Action - Request to host '" + host + "' failed: " + err.Error(), err
}
