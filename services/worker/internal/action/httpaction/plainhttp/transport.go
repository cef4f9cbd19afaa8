// Package plainhttp sends HTTP/1.1 requests to plain-http targets on kept-alive connections,
// in the caller's goroutine: the request is written and the answer read on the connection
// directly, where net/http's transport hands each request to a writing and a reading goroutine
// of the connection and back (a fifth of a worker's CPU in a burst of deliveries, the
// goroutine switches and their channels). The wire format is net/http's own: Request.Write
// writes the request and ReadResponse reads the answer, so nothing of HTTP is parsed here.
//
// Only what a synchronous exchange does as well as net/http is sent this way: an http URL
// with no proxy for it and a body of at most MaxBody bytes. A body that short is taken whole
// by the sockets' buffers, so a target that answers before it reads the body (a refusal) does
// not leave the write waiting for a read that never comes, as a longer one could: net/http
// reads the answer while it writes. Everything else, https first of all, goes to the fallback
// transport.
//
// A kept connection the target closed while it was idle is found before it is used again
// (stale: a look at the socket without reading) and dropped; the target closing it in the
// instant between that look and the request fails the request, as it does with net/http for
// a request that is not idempotent.
package plainhttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// Defaults of Options, those of the worker's net/http transport.
const (
	DefaultMaxIdlePerHost = 64
	DefaultMaxIdle        = 512
	DefaultIdleTimeout    = 90 * time.Second
	// MaxBody is the longest body sent directly; a longer one goes to the fallback. A job's
	// body is at most 8,192 characters (schemas/job.schema.json), so every ASCII one is sent
	// directly. 16 KiB is what Linux gives a socket's send buffer to begin with.
	MaxBody = 16 << 10
	// max1xx bounds the informational answers skipped before the final one, as net/http does.
	max1xx = 5
	// bufferSize is each connection's read and write buffer.
	bufferSize = 4 << 10
)

// Options configure a Transport.
type Options struct {
	// Dial makes a connection; the worker's dialer refuses denied addresses.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy names the proxy of a request, as http.Transport.Proxy; a request with one goes to
	// the fallback. Nil means none.
	Proxy func(*http.Request) (*url.URL, error)
	// Fallback sends every request this transport does not.
	Fallback http.RoundTripper
	// MaxIdlePerHost and MaxIdle bound the idle connections kept, per address and in all;
	// IdleTimeout closes one idle longer. Zero means the defaults.
	MaxIdlePerHost, MaxIdle int
	IdleTimeout             time.Duration
	// Now tells the time of the idle connections; default time.Now.
	Now func() time.Time
}

// Transport is an http.RoundTripper. It is safe for concurrent use.
type Transport struct {
	o    Options
	idle *pool
}

// New returns a Transport.
func New(o Options) *Transport {
	if o.Dial == nil {
		o.Dial = (&net.Dialer{}).DialContext
	}
	if o.Fallback == nil {
		o.Fallback = http.DefaultTransport
	}
	if o.MaxIdlePerHost <= 0 {
		o.MaxIdlePerHost = DefaultMaxIdlePerHost
	}
	if o.MaxIdle <= 0 {
		o.MaxIdle = DefaultMaxIdle
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Transport{o: o, idle: newPool(o.MaxIdlePerHost, o.MaxIdle, o.IdleTimeout, o.Now)}
}

// CloseIdleConnections closes the idle connections, the fallback's too.
func (t *Transport) CloseIdleConnections() {
	t.idle.closeAll()
	if c, ok := t.o.Fallback.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends one request and reads its answer's head; the connection goes back to the
// pool when the body has been read to its end and closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.direct(req) {
		return t.o.Fallback.RoundTrip(req)
	}
	ctx := req.Context()
	addr := address(req.URL)
	c, err := t.conn(ctx, addr)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	deadline, _ := ctx.Deadline() // zero: none
	_ = c.nc.SetDeadline(deadline)
	// The context's end stops the exchange at once: the deadline in the past ends any read or
	// write under way, and the connection is not kept. Set after the context's own deadline,
	// which would otherwise undo it when the context ends in between.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	resp, err := c.exchange(req)
	if err != nil {
		stop()
		_ = c.nc.Close()
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w (%w)", ctx.Err(), err)
		case errors.Is(err, os.ErrDeadlineExceeded) && !deadline.IsZero():
			// The context's own deadline, met on the socket before its timer said so.
			return nil, fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	reuse := !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols
	resp.Body = &body{rc: resp.Body, eof: resp.Body == http.NoBody, done: func(eof bool) {
		if stop() && eof && reuse {
			t.idle.put(addr, c)
			return
		}
		_ = c.nc.Close()
	}}
	return resp, nil
}

// aLongTimeAgo is a deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// direct reports whether req is one this transport sends itself.
func (t *Transport) direct(req *http.Request) bool {
	if !staleCheckable || req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		return false
	}
	if req.ContentLength < 0 || req.ContentLength > MaxBody || (req.ContentLength == 0 && req.Body != nil && req.Body != http.NoBody) {
		return false // a length unknown, or too long to be sure the write cannot wait
	}
	if t.o.Proxy != nil {
		if p, err := t.o.Proxy(req); err != nil || p != nil {
			return false // the fallback says why, or goes through the proxy
		}
	}
	return true
}

// conn is an idle connection that is still open, or a new one.
func (t *Transport) conn(ctx context.Context, addr string) (*conn, error) {
	for {
		c := t.idle.get(addr)
		if c == nil {
			break
		}
		if c.br.Buffered() == 0 && !stale(c.nc) { // bytes read past the last answer: not HTTP
			return c, nil
		}
		_ = c.nc.Close()
	}
	nc, err := t.o.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, bufferSize), bw: bufio.NewWriterSize(nc, bufferSize)}, nil
}

// address is the host and port to dial for an http URL.
func address(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// closeBody closes the request's body, which a RoundTripper must do on every path.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// conn is a kept-alive connection with its buffers.
type conn struct {
	nc    net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // when it went idle
}

// exchange writes the request and reads the final answer's head, skipping informational ones.
func (c *conn) exchange(req *http.Request) (*http.Response, error) {
	if err := req.Write(c.bw); err != nil {
		return nil, fmt.Errorf("writing the request: %w", err)
	}
	if err := c.bw.Flush(); err != nil {
		return nil, fmt.Errorf("writing the request: %w", err)
	}
	for range max1xx + 1 {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			// ReadResponse's errors for no answer at all or half a head.
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("reading the answer: the target closed the connection before it answered in full: %w", err)
			}
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode < 100 {
			return resp, nil
		}
	}
	return nil, fmt.Errorf("reading the answer: more than %d informational answers", max1xx)
}

// body gives its connection back when it is closed: to the pool when it was read to its end.
type body struct {
	rc   io.ReadCloser
	eof  bool
	once sync.Once
	done func(eof bool)
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close does not read what is left: net/http's body would, to its end, however long it is.
func (b *body) Close() error {
	b.once.Do(func() { b.done(b.eof) })
	return nil
}
