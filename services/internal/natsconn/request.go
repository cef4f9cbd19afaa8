package natsconn

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/config"
)

// ErrConnectionLost ends a request whose connection was lost while it waited for the answer.
var ErrConnectionLost = errors.New("the connection to NATS was lost before the answer came")

// RequestMsgWithContext is nats.Conn's, except that a request in flight when the connection is
// lost ends then, with ErrConnectionLost: its answer, if one was sent, went to the connection
// that is gone. nats.go let it wait out ctx, so a gateway request that met a NATS link that
// hangs waited its 30 s although the link was given up after about 3 s. Whether the request
// reached the responder cannot be told. A request made while the connection is being made
// again is held by nats.go and sent once it is back, as before.
func (c *Conn) RequestMsgWithContext(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	lost := c.lostSignal()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lost:
			cancel(ErrConnectionLost)
		case <-ctx.Done():
		}
	}()
	reply, err := c.Conn.RequestMsgWithContext(ctx, msg)
	switch {
	case err == nil:
		c.unanswered.Store(0)
	case errors.Is(context.Cause(ctx), ErrConnectionLost):
		return nil, ErrConnectionLost
	case errors.Is(err, nats.ErrNoResponders):
		c.noResponder()
	}
	return reply, err
}

// noResponder counts a request no responder took. After watchFailures in a row it moves the
// connection to another server, when one is known: a server cut off from the rest of its
// cluster knows no responder on the other side, and its clients stay connected to it (it
// answers their pings). The gateway, whose NATS user may only send requests to the planners,
// cannot watch JetStream as the planners and workers do (watch.go). With every responder gone
// (no planner running), the moves are harmless, a reconnection every watchFailures requests.
func (c *Conn) noResponder() {
	if c.unanswered.Add(1) < watchFailures || len(c.Servers()) < 2 || !c.IsConnected() {
		return
	}
	c.unanswered.Store(0)
	c.log.Warn("no responder through this NATS server for requests in a row; moving to another",
		"server", config.RedactURLs(c.ConnectedUrl()), "requests", watchFailures)
	if err := c.ForceReconnect(); err != nil {
		c.log.Warn("nats reconnect", "error", err)
	}
}

func (c *Conn) lostSignal() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// disconnected ends the requests waiting on the connection that is gone.
func (c *Conn) disconnected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.lost)
	c.lost = make(chan struct{})
}
