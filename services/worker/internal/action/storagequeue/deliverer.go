// Package storagequeue delivers StorageQueue actions: the job's message, wrapped in the XML
// envelope the original service wrote, enqueued with azqueue on the job's storage account and
// queue, authorised by the job's SAS token alone.
//
// Errors: a 403 (bad, expired or under-privileged SAS) and a 404 (missing queue) are retryable,
// because both are fixed outside the job definition (tokens are rotated, queues are created
// later) and a retry policy is bounded anyway; so are 408, 409, 429, 5xx and network failures.
// Any other 4xx (a malformed request, a message over the 64 KiB limit) and a definition that
// can never be sent (missing or malformed account, queue or token) are permanent.
package storagequeue

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// DefaultEndpoint is the public Azure cloud's queue service; {account} is the job's account.
const DefaultEndpoint = "https://{account}.queue.core.windows.net"

// DefaultTimeout bounds one attempt when the caller's context has no earlier deadline.
const DefaultTimeout = 60 * time.Second

// Config says where queues live and how the client behaves.
type Config struct {
	// Endpoint is the queue service URL template: {account} becomes the job's storage account.
	// Empty means DefaultEndpoint. Other clouds: https://{account}.queue.core.chinacloudapi.cn;
	// Azurite (path style): http://127.0.0.1:10001/{account}.
	Endpoint string
	// Base64 encodes the envelope before enqueueing it, for consumers that expect base64 text
	// (Azure Functions queue triggers, the classic .NET storage client). Off by default: the
	// message text is the envelope itself.
	Base64 bool
	// Timeout bounds one attempt; default DefaultTimeout.
	Timeout time.Duration
	// ClientOptions tunes the azqueue pipeline (transport, retries); nil means
	// DefaultClientOptions.
	ClientOptions *azqueue.ClientOptions
	// RootCAs are the authorities trusted for the endpoint (a private CA besides the system's,
	// an endpoint behind TLS inspection); nil means the system's. Used when ClientOptions
	// brings no transport of its own.
	RootCAs *x509.CertPool
}

// DefaultClientOptions keep the SDK's own retries few and quick: the job's retry policy is the
// real one, and the attempt's time-out bounds everything.
func DefaultClientOptions() *azqueue.ClientOptions {
	return &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry:     policy.RetryOptions{MaxRetries: 2, RetryDelay: 500 * time.Millisecond, MaxRetryDelay: 2 * time.Second},
		Telemetry: policy.TelemetryOptions{ApplicationID: "resched-worker"},
	}}
}

// Deliverer enqueues StorageQueue actions. It is safe for concurrent use.
type Deliverer struct {
	endpoint string
	base64   bool
	timeout  time.Duration
	options  *azqueue.ClientOptions
}

var _ action.Deliverer = (*Deliverer)(nil)

// New checks the configuration and returns a Deliverer.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	u, err := url.Parse(strings.ReplaceAll(cfg.Endpoint, "{account}", "account"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("storage queue endpoint %q: want an http(s) URL without a query, with {account} where the account name goes", cfg.Endpoint)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ClientOptions == nil {
		cfg.ClientOptions = DefaultClientOptions()
	}
	if cfg.RootCAs != nil && cfg.ClientOptions.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
		opts := *cfg.ClientOptions
		opts.Transport = &http.Client{Transport: t}
		cfg.ClientOptions = &opts
	}
	return &Deliverer{endpoint: strings.TrimRight(cfg.Endpoint, "/"), base64: cfg.Base64, timeout: cfg.Timeout,
		options: cfg.ClientOptions}, nil
}

// Deliver enqueues one attempt's envelope.
func (d *Deliverer) Deliver(ctx context.Context, a *job.ActionSpec, m action.Meta) (string, error) {
	if a == nil || a.QueueMessage == nil {
		return failed(action.Permanent(errors.New("storage queue action without queueMessage")))
	}
	q := a.QueueMessage
	target := fmt.Sprintf("storage queue %q of account %q", q.QueueName, q.StorageAccount)
	token, err := check(q)
	if err != nil {
		return failed(action.Permanent(fmt.Errorf("%s: %w", target, err)))
	}
	body, err := Envelope(q.Message, m)
	if err != nil {
		return failed(action.Permanent(fmt.Errorf("%s: %w", target, err)))
	}
	if d.base64 {
		body = base64.StdEncoding.EncodeToString([]byte(body))
	}
	client, err := azqueue.NewQueueClientWithNoCredential(d.queueURL(q.StorageAccount, q.QueueName, token), d.options)
	if err != nil {
		return failed(action.Permanent(fmt.Errorf("%s: %s", target, redact(err, token))))
	}
	ctx, cancel := action.Bounded(ctx, d.timeout)
	defer cancel()
	resp, err := client.EnqueueMessage(ctx, body, nil)
	if err != nil {
		return failed(classify(target, err, token))
	}
	id := ""
	if len(resp.Messages) > 0 && resp.Messages[0].MessageID != nil {
		id = *resp.Messages[0].MessageID
	}
	return fmt.Sprintf("Enqueued message %s to %s", id, target), nil
}

// failed makes the history message of a failed attempt: the error's own text, which names the
// target and what it answered and never holds the token.
func failed(err error) (string, error) { return err.Error(), err }

func (d *Deliverer) queueURL(account, queue, token string) string {
	return strings.ReplaceAll(d.endpoint, "{account}", account) + "/" + queue + "?" + token
}

var accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)

// check refuses what Azure would refuse forever, and what would not even make a URL.
func check(q *job.StorageQueueMessage) (token string, err error) {
	if !accountName.MatchString(q.StorageAccount) {
		return "", errors.New("the storage account name must be 3 to 24 lower-case letters and digits")
	}
	if !queueName(q.QueueName) {
		return "", errors.New("the queue name must be 3 to 63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit")
	}
	token = strings.TrimPrefix(q.SASToken, "?")
	if token == "" {
		return "", errors.New("the SAS token is missing")
	}
	if _, err := url.ParseQuery(token); err != nil || strings.ContainsAny(token, "# \t\r\n") || strings.Contains(token, "://") {
		return "", errors.New("the SAS token is not a URL query string (give the query alone, not a URL)")
	}
	return token, nil
}

func queueName(s string) bool {
	if len(s) < 3 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// classify turns an enqueue failure into the attempt's error, permanent where retrying cannot
// help, with the SAS token kept out of the text.
func classify(target string, err error, token string) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		e := fmt.Errorf("%s: the service answered %d %s", target, re.StatusCode, re.ErrorCode)
		if retryableStatus(re.StatusCode) {
			return e
		}
		return action.Permanent(e)
	}
	for _, c := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, c) {
			return fmt.Errorf("%s: %w", target, c)
		}
	}
	return fmt.Errorf("%s: %s", target, redact(err, token))
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusForbidden, http.StatusNotFound, http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return code >= 500
}

var queryPart = regexp.MustCompile(`\?[^\s"']*`)

// redact drops the SAS token, and any URL query, from an error's text (network errors quote
// the request URL in full).
func redact(err error, token string) string {
	s := err.Error()
	if token != "" {
		s = strings.ReplaceAll(s, token, "REDACTED")
	}
	return queryPart.ReplaceAllString(s, "?REDACTED")
}
