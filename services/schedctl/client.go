package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natsconn"
)

// The connection settings' defaults and the environment variables that override them; the
// flags --server, --prefix and --timeout override both.
const (
	defaultServer  = "nats://127.0.0.1:4222"
	defaultTimeout = 5 * time.Second
	envServer      = "NATS_URL"
	envPrefix      = "RESCHED_SUBJECT_PREFIX"
)

// client sends requests to the planner's NATS API (docs/nats-api.md).
type client struct {
	nc       *nats.Conn
	subjects bus.Subjects
	timeout  time.Duration
	server   string // the server URL without credentials, for messages
	identity string // who the client is, for messages

	mu       sync.Mutex
	denied   []error                    // permission violations the server reported
	waiting  map[int]context.CancelFunc // the requests in flight, ended at a violation
	lastWait int
}

// dial connects to NATS as the options say.
func dial(o natsconn.Options, prefix string, timeout time.Duration) (*client, error) {
	shown := redactURL(o.URL)
	for _, part := range strings.Split(o.URL, ",") {
		if _, err := url.Parse(strings.TrimSpace(part)); err != nil && strings.Contains(part, "@") {
			// The parse error would quote the credentials, or part of them.
			return nil, errors.New("connect to NATS: a server URL with credentials does not parse (check NATS_URL or --server)")
		}
	}
	c := &client{subjects: bus.NewSubjects(prefix), timeout: timeout, server: shown, identity: o.Identity()}
	nc, err := natsconn.Dial(o, "schedctl", timeout, c.noteError)
	if err != nil {
		// The error may quote the URL (a parse error does): never show its credentials.
		text := err.Error()
		for _, part := range strings.Split(o.URL, ",") {
			if part = strings.TrimSpace(part); part != "" {
				text = strings.ReplaceAll(text, part, redactURL(part))
			}
		}
		if natsconn.IsAuthError(err) {
			return nil, fmt.Errorf("connect to NATS at %s: the server refused the credentials of %s (%s): check --user/--password, --creds, --nkey or the URL", shown, c.identity, text)
		}
		return nil, fmt.Errorf("connect to NATS at %s: %s (is NATS_URL or --server right?)", shown, text)
	}
	c.nc = nc
	return c, nil
}

// noteError keeps the permission violations the server reports: a request it refuses to pass
// on, or a reply it refuses to deliver, otherwise looks like no planner answering.
func (c *client) noteError(err error) {
	if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
		c.mu.Lock()
		c.denied = append(c.denied, err)
		for _, cancel := range c.waiting {
			cancel()
		}
		c.mu.Unlock()
	}
}

// waitCtx is the context of one request: it ends at the time-out, or as soon as the server
// reports a permissions violation, which means no answer will come.
func (c *client) waitCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	c.mu.Lock()
	if c.waiting == nil {
		c.waiting = map[int]context.CancelFunc{}
	}
	c.lastWait++
	id := c.lastWait
	c.waiting[id] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
		cancel()
	}
}

// permissionError says why a request failed when the server refused it for permissions.
func (c *client) permissionError(subject string) error {
	_ = c.nc.FlushTimeout(time.Second) // the server's -ERR comes after the publish
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.denied) == 0 {
		return nil
	}
	return &permissionError{subject: subject, identity: c.identity, server: c.server, cause: c.denied[0]}
}

// permissionError is a request the server's permissions stopped.
type permissionError struct {
	subject, identity, server string
	cause                     error
}

func (e *permissionError) Error() string {
	return fmt.Sprintf("permission denied: NATS at %s does not let %s do this (%s): %v; a tenant may only use its own collections' subjects, and must use the --inbox-prefix its permissions allow for replies",
		e.server, e.identity, e.subject, e.cause)
}

func (c *client) close() { c.nc.Close() }

// request sends body to <prefix>.api.<tokens> with headers and returns the reply, or the
// planner's error as an *apiError, or a *noPlannerError when nobody answers.
func (c *client) request(body []byte, headers map[string]string, tokens ...string) (*nats.Msg, error) {
	subject := c.subjects.API(tokens...)
	req := nats.NewMsg(subject)
	req.Data = body
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	ctx, done := c.waitCtx()
	defer done()
	msg, err := c.nc.RequestMsgWithContext(ctx, req)
	if errors.Is(err, context.DeadlineExceeded) {
		err = nats.ErrTimeout
	}
	if err != nil {
		if perr := c.permissionError(subject); perr != nil {
			return nil, perr
		}
	}
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return nil, c.tooLarge(len(body))
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &noPlannerError{subject: subject, server: c.server}
	case errors.Is(err, nats.ErrTimeout):
		return nil, &noPlannerError{subject: subject, server: c.server, waited: c.timeout}
	case err != nil:
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, decodeAPIError(code, msg)
	}
	return msg, nil
}

// publishDurable publishes msg to JetStream, waits for the stream's acknowledgement and
// returns the message's sequence in the stream.
func (c *client) publishDurable(msg *nats.Msg) (uint64, error) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return 0, err
	}
	ctx, done := c.waitCtx()
	defer done()
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		if perr := c.permissionError(msg.Subject); perr != nil {
			return 0, perr
		}
		if errors.Is(err, nats.ErrMaxPayload) {
			return 0, c.tooLarge(len(msg.Data))
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			return 0, fmt.Errorf("publish on %s: no stream takes it (NATS at %s) — has a planner ever run against this NATS with this prefix?", msg.Subject, c.server)
		}
		return 0, fmt.Errorf("publish on %s: %w", msg.Subject, err)
	}
	return ack.Sequence, nil
}

// watch subscribes to subject and makes sure the server took the subscription: one its
// permissions refuse is a *permissionError, and is not left to end the requests that follow.
func (c *client) watch(subject string) (*nats.Subscription, error) {
	sub, err := c.nc.SubscribeSync(subject)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	perr := c.permissionError(subject)
	if perr == nil {
		return sub, nil
	}
	_ = sub.Unsubscribe()
	c.mu.Lock()
	c.denied = nil
	c.mu.Unlock()
	return nil, perr
}

// outcome waits up to wait on sub for the planners' event about the intake message seq: the
// one carrying that sequence. It is nil when none came in time.
func outcome(sub *nats.Subscription, seq uint64, wait time.Duration) (*bus.Event, error) {
	deadline := time.Now().Add(wait)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if errors.Is(err, nats.ErrTimeout) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("wait for the outcome on %s: %w", sub.Subject, err)
		}
		var e bus.Event
		if json.Unmarshal(m.Data, &e) == nil && e.IntakeSequence == seq {
			return &e, nil
		}
	}
}

// tooLarge is the error of a message the NATS server refuses for its size: nats.go says only
// "maximum payload exceeded", and what is too large is nearly always a job definition.
func (c *client) tooLarge(n int) error {
	return fmt.Errorf("the request is %d bytes, more than the NATS server takes (%d); a job definition may be at most 16 KiB (16,384 bytes)", n, c.nc.MaxPayload())
}

// apiError is an error the planner answered: {"error": {"code", "message", "details"}} with
// the micro error headers.
type apiError struct {
	Status  int              `json:"-"` // from the Nats-Service-Error-Code header; 0 if unreadable
	Code    string           `json:"code"`
	Message string           `json:"message"`
	Details []bus.ErrorEntry `json:"details"`
}

func (e *apiError) Error() string { return e.Message }

// decodeAPIError reads an error reply. The body is the authority; the description header
// stands in when the body is not the documented shape (another service on the subject).
func decodeAPIError(code string, msg *nats.Msg) *apiError {
	var body struct {
		Error *apiError `json:"error"`
	}
	e := &apiError{}
	if json.Unmarshal(msg.Data, &body) == nil && body.Error != nil && body.Error.Message != "" {
		e = body.Error
	}
	if e.Message == "" {
		e.Message = msg.Header.Get(micro.ErrorHeader)
	}
	if e.Message == "" {
		e.Message = "the planner answered error " + code
	}
	e.Status, _ = strconv.Atoi(code)
	return e
}

// noPlannerError says nobody answered a request: no planner runs, or it listens on another
// NATS server or under another subject prefix.
type noPlannerError struct {
	subject string
	server  string
	waited  time.Duration // 0: NATS said at once that nobody listens
}

func (e *noPlannerError) Error() string {
	within := ""
	if e.waited > 0 {
		within = " within " + e.waited.String()
	}
	return fmt.Sprintf("no planner answered on %s%s (NATS at %s) — is the planner running and NATS_URL right?",
		e.subject, within, e.server)
}

// redactURL removes passwords and tokens from a NATS URL (or a comma-separated list of them)
// so error messages never show them.
func redactURL(server string) string {
	parts := strings.Split(server, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			if strings.Contains(p, "@") { // unparseable, but may hold credentials
				parts[i] = "(a URL with credentials)"
			}
			continue
		}
		u.User = url.User("REDACTED")
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// checkPrefix refuses a subject prefix that cannot start a subject.
func checkPrefix(p string) error {
	if p == "" || strings.ContainsAny(p, " \t\r\n*>") || strings.HasPrefix(p, ".") ||
		strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return fmt.Errorf("subject prefix %q: must be dot-separated tokens without spaces or wildcards", p)
	}
	return nil
}
