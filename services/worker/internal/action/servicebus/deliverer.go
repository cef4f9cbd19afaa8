// Package servicebus delivers ServiceBusQueue and ServiceBusTopic actions with azservicebus:
// the job's message, its brokered and custom properties and the scheduler's identity
// properties (NewMessage), sent to the queue or topic of the job's namespace with its shared
// access key. One client per namespace and key, and one sender per entity, are kept and
// reused across deliveries (clients), so a busy job costs one send, not a connection. The
// job's transportType is ignored: azservicebus always speaks AMQP.
//
// Errors: unauthorized (a wrong or rotated key) and a missing entity are retryable, because
// both are fixed outside the job definition (keys are regenerated, entities created later)
// and a retry policy is bounded anyway; so are time-outs, cancellations and lost connections.
// A message over the entity's size limit, and a definition that can never be sent (no
// payload, namespace, entity or key, or one that cannot go into a connection string), are
// permanent.
package servicebus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// DefaultEndpoint is the public Azure cloud; {namespace} is the job's namespace.
const DefaultEndpoint = "sb://{namespace}.servicebus.windows.net"

// DefaultTimeout bounds one attempt when the caller's context has no earlier deadline.
const DefaultTimeout = 60 * time.Second

// DefaultIdleTimeout is how long a namespace client may go unused before it is closed.
const DefaultIdleTimeout = 10 * time.Minute

// Config says where namespaces live and how clients behave.
type Config struct {
	// Endpoint is the connection string's Endpoint as a template: {namespace} becomes the
	// job's namespace. Empty means DefaultEndpoint, with which a namespace holding a dot is
	// taken as a full host name (other clouds: ns.servicebus.chinacloudapi.cn). An emulator:
	// sb://127.0.0.1:5672 (every namespace goes there).
	Endpoint string
	// DevelopmentEmulator adds UseDevelopmentEmulator=true to the connection string: plain
	// AMQP without TLS (port 5672 by default), still with the SAS token handshake. For the
	// Service Bus emulator and the repository's fake broker, never for Azure.
	DevelopmentEmulator bool
	// Timeout bounds one attempt; default DefaultTimeout.
	Timeout time.Duration
	// IdleTimeout closes a namespace client (its connection) unused for that long; default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// ClientOptions configure every client (retries, TLS, CustomEndpoint, dialer); nil means
	// DefaultClientOptions.
	ClientOptions *azservicebus.ClientOptions
}

// DefaultClientOptions keep the SDK's own retries few and quick: the job's retry policy is the
// real one, and the attempt's time-out bounds everything.
func DefaultClientOptions() *azservicebus.ClientOptions {
	return &azservicebus.ClientOptions{ApplicationID: "resched-worker", RetryOptions: azservicebus.RetryOptions{
		MaxRetries: 2, RetryDelay: 500 * time.Millisecond, MaxRetryDelay: 2 * time.Second}}
}

// Deliverer sends Service Bus actions. It is safe for concurrent use; Close releases its
// connections.
type Deliverer struct {
	endpoint string
	emulator bool
	timeout  time.Duration
	clients  *clients
}

var _ action.Deliverer = (*Deliverer)(nil)

// New checks the configuration and returns a Deliverer.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	u, err := url.Parse(strings.ReplaceAll(cfg.Endpoint, "{namespace}", "namespace"))
	if err != nil || u.Scheme != "sb" || u.Host == "" || strings.ContainsAny(cfg.Endpoint, "; ") {
		return nil, fmt.Errorf("service bus endpoint %q: want sb://host[:port], with {namespace} where the namespace goes", cfg.Endpoint)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ClientOptions == nil {
		cfg.ClientOptions = DefaultClientOptions()
	}
	return &Deliverer{endpoint: cfg.Endpoint, emulator: cfg.DevelopmentEmulator, timeout: cfg.Timeout,
		clients: newClients(cfg.ClientOptions, cfg.IdleTimeout)}, nil
}

// Close closes every cached client; deliveries after it fail.
func (d *Deliverer) Close(ctx context.Context) error { return d.clients.close(ctx) }

// target is what one action sends to.
type target struct {
	sb     *job.ServiceBusMessage
	kind   string // "queue" or "topic"
	entity string
}

func (t target) String() string {
	return fmt.Sprintf("Service Bus %s %q in namespace %q", t.kind, t.entity, t.sb.Namespace)
}

// Deliver sends one attempt's message.
func (d *Deliverer) Deliver(ctx context.Context, a *job.ActionSpec, m action.Meta) (string, error) {
	t, err := targetOf(a)
	if err != nil {
		return failed(action.Permanent(err))
	}
	endpoint, auth, err := d.check(t)
	if err != nil {
		return failed(action.Permanent(fmt.Errorf("%s: %w", t, err)))
	}
	connStr := "Endpoint=" + endpoint + ";SharedAccessKeyName=" + auth.SASKeyName + ";SharedAccessKey=" + auth.SASKey
	if d.emulator {
		connStr += ";UseDevelopmentEmulator=true"
	}
	s, err := d.clients.sender(endpoint, auth.SASKeyName, auth.SASKey, t.entity, connStr)
	if err != nil {
		return failed(classify(ctx, t, err, auth.SASKey))
	}
	ctx, cancel := action.Bounded(ctx, d.timeout)
	defer cancel()
	msg := NewMessage(t.sb, m)
	if err := s.SendMessage(ctx, msg, nil); err != nil {
		return failed(classify(ctx, t, err, auth.SASKey))
	}
	return fmt.Sprintf("Sent message %s to %s", deref(msg.MessageID), t), nil
}

func targetOf(a *job.ActionSpec) (target, error) {
	switch {
	case a == nil:
		return target{}, errors.New("no action")
	case a.Type == job.ActionServiceBusQueue && a.ServiceBusQueueMessage != nil:
		return target{&a.ServiceBusQueueMessage.ServiceBusMessage, "queue", a.ServiceBusQueueMessage.QueueName}, nil
	case a.Type == job.ActionServiceBusTopic && a.ServiceBusTopicMessage != nil:
		return target{&a.ServiceBusTopicMessage.ServiceBusMessage, "topic", a.ServiceBusTopicMessage.TopicPath}, nil
	}
	return target{}, fmt.Errorf("%s action without its Service Bus message", a.Type)
}

var namespaceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$`)

// check refuses what can never be sent, and what would not make a connection string.
func (d *Deliverer) check(t target) (endpoint string, auth *job.ServiceBusAuthentication, err error) {
	if !namespaceName.MatchString(t.sb.Namespace) {
		return "", nil, errors.New("the namespace must be letters, digits, hyphens and dots")
	}
	if t.entity == "" || len(t.entity) > 260 || strings.ContainsAny(t.entity, " \t\r\n;") {
		return "", nil, fmt.Errorf("the %s name must be 1 to 260 characters without spaces or semicolons", t.kind)
	}
	auth = t.sb.Authentication
	if auth == nil || auth.SASKeyName == "" || auth.SASKey == "" {
		return "", nil, errors.New("a shared access key name and key are required")
	}
	if strings.Contains(auth.SASKeyName, ";") || strings.Contains(auth.SASKey, ";") {
		return "", nil, errors.New("the shared access key name and key cannot hold a semicolon")
	}
	if d.endpoint == DefaultEndpoint && strings.Contains(t.sb.Namespace, ".") {
		return "sb://" + t.sb.Namespace, auth, nil
	}
	return strings.ReplaceAll(d.endpoint, "{namespace}", t.sb.Namespace), auth, nil
}

// classify turns a send failure into the attempt's error, permanent where retrying cannot
// help, with the key kept out of the text.
func classify(ctx context.Context, t target, err error, key string) error {
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return action.Permanent(fmt.Errorf("%s: the message is larger than the entity accepts", t))
	}
	if c := ctx.Err(); c != nil {
		return fmt.Errorf("%s: %w", t, c) // SDK errors do not always wrap the context's
	}
	for _, c := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, c) {
			return fmt.Errorf("%s: %w", t, c)
		}
	}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeUnauthorizedAccess {
		return fmt.Errorf("%s: unauthorized: the shared access key was refused", t)
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) && amqpErr.Condition == amqp.ErrCondNotFound {
		return fmt.Errorf("%s: the entity does not exist", t)
	}
	if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeNotFound {
		return fmt.Errorf("%s: the entity does not exist", t)
	}
	return fmt.Errorf("%s: %s", t, strings.ReplaceAll(err.Error(), key, "REDACTED"))
}

// failed makes the history message of a failed attempt: the error's own text, which names the
// target and what went wrong and never holds the key.
func failed(err error) (string, error) { return err.Error(), err }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
