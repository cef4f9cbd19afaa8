package plainhttp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/worker/internal/action/httpaction/plainhttp"
)

// countingServer answers 200 with body and counts the connections it accepted.
func countingServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// post sends a small POST through c and returns the answer's body read to its end, within
// 10 s.
func post(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// unused is a fallback that fails the test: the request should have gone directly.
type unused struct{ t *testing.T }

func (u unused) RoundTrip(r *http.Request) (*http.Response, error) {
	u.t.Errorf("%s %s went to the fallback", r.Method, r.URL)
	return nil, errors.New("fallback")
}

func TestAConnectionIsKeptAndUsedAgain(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte(r.Method+" "), b...))
	})
	tr := plainhttp.New(plainhttp.Options{Fallback: unused{t}})
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 5 {
		if _, got := post(t, c, srv.URL+"/x"); got != `POST {"a":1}` {
			t.Fatalf("the target answered %q", got)
		}
	}
	// An answer without a body is at its end at once, read or not.
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/x", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	post(t, c, srv.URL+"/x")
	if n := conns.Load(); n != 1 {
		t.Fatalf("7 requests one after another took %d connections, want 1", n)
	}
}

// oneShotServer answers each connection's first request with keep-alive and then closes the
// connection, as a target closes an idle connection at its keep-alive time-out.
func oneShotServer(t *testing.T, closed chan<- struct{}) string {
	t.Helper()
	return "http://" + testenv.ServeTCP(t, func(nc net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(nc))
		if err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
			_, _ = io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		_ = nc.Close()
		closed <- struct{}{}
	})
}

func TestAConnectionTheTargetClosedWhileIdleIsNotUsed(t *testing.T) {
	closed := make(chan struct{}, 10)
	u := oneShotServer(t, closed)
	tr := plainhttp.New(plainhttp.Options{Fallback: unused{t}})
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i := range 3 {
		if _, got := post(t, c, u); got != "ok" {
			t.Fatalf("request %d: the target answered %q", i, got)
		}
		<-closed // the kept connection is closed at the target before the next request
	}
}

func TestInformationalAnswersAreSkipped(t *testing.T) {
	addr := testenv.ServeTCP(t, func(nc net.Conn) {
		defer nc.Close()
		if _, err := http.ReadRequest(bufio.NewReader(nc)); err == nil {
			_, _ = io.WriteString(nc, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone")
		}
	})
	c := &http.Client{Transport: plainhttp.New(plainhttp.Options{Fallback: unused{t}})}
	resp, got := post(t, c, "http://"+addr)
	if resp.StatusCode != http.StatusCreated || got != "done" || resp.Header.Get("Link") != "" {
		t.Fatalf("answer %d %q (Link %q), want the final 201 \"done\"", resp.StatusCode, got, resp.Header.Get("Link"))
	}
}

func TestAConnectionIsNotKeptAfterABodyLeftUnreadOrAClose(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 1000)))
	})
	tr := plainhttp.New(plainhttp.Options{Fallback: unused{t}})
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/partly", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // 990 bytes left on the connection
	post(t, c, srv.URL+"/close")
	post(t, c, srv.URL+"/after")
	if n := conns.Load(); n != 3 {
		t.Fatalf("took %d connections, want 3 (none kept after a body left unread or a Connection: close)", n)
	}
}

func TestTheContextEndsTheExchange(t *testing.T) {
	release := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	c := &http.Client{Transport: plainhttp.New(plainhttp.Options{Fallback: unused{t}})}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline: %v, want context.DeadlineExceeded", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(req)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}

// recording is a fallback that answers 299 and records what it was given.
type recording struct {
	mu   sync.Mutex
	urls []string
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 299, Body: http.NoBody, Request: req}, nil
}

func TestWhatIsNotSentDirectlyGoesToTheFallback(t *testing.T) {
	srv, _ := countingServer(t, func(http.ResponseWriter, *http.Request) {})
	proxied := srv.URL + "/proxied"
	fb := &recording{}
	tr := plainhttp.New(plainhttp.Options{Fallback: fb, Proxy: func(r *http.Request) (*url.URL, error) {
		if r.URL.Path == "/proxied" {
			return url.Parse("http://proxy.example")
		}
		return nil, nil
	}})
	long, _ := http.NewRequest(http.MethodPost, srv.URL+"/long", strings.NewReader(strings.Repeat("x", plainhttp.MaxBody+1)))
	unknown, _ := http.NewRequest(http.MethodPost, srv.URL+"/unknown", io.MultiReader(strings.NewReader("x")))
	secure, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
	viaProxy, _ := http.NewRequest(http.MethodGet, proxied, nil)
	direct, _ := http.NewRequest(http.MethodPost, srv.URL+"/direct", strings.NewReader(strings.Repeat("x", plainhttp.MaxBody)))
	for _, req := range []*http.Request{long, unknown, secure, viaProxy, direct} {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", req.URL, err)
		}
		_ = resp.Body.Close()
	}
	want := []string{srv.URL + "/long", srv.URL + "/unknown", "https://example.com/", proxied}
	if strings.Join(fb.urls, " ") != strings.Join(want, " ") {
		t.Fatalf("the fallback had %q, want %q (the body of MaxBody bytes sent directly)", fb.urls, want)
	}
}

func TestATargetThatAnswersBeforeReadingTheBodyIsHeard(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	addr := testenv.ServeTCP(t, func(nc net.Conn) {
		defer nc.Close()
		br := bufio.NewReader(nc)
		for { // the head alone; the body is never read
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		_, _ = io.WriteString(nc, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		<-done
	})
	c := &http.Client{Transport: plainhttp.New(plainhttp.Options{Fallback: unused{t}})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr, strings.NewReader(strings.Repeat("x", plainhttp.MaxBody)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("a body of MaxBody bytes to a target that does not read it: %v, want its 413", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

func TestAConnectionWithBytesPastItsAnswerIsNotUsedAgain(t *testing.T) {
	var conns atomic.Int64
	addr := testenv.ServeTCP(t, func(nc net.Conn) {
		defer nc.Close()
		first := conns.Add(1) == 1
		br := bufio.NewReader(nc)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			answer := "HTTP/1.1 204 No Content\r\n\r\n"
			if first {
				answer += "HTTP/1.1 500 Not Asked For\r\n\r\n" // in the same write as the answer
				first = false
			}
			_, _ = io.WriteString(nc, answer)
		}
	})
	tr := plainhttp.New(plainhttp.Options{Fallback: unused{t}})
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for i := range 3 {
		resp, _ := post(t, c, "http://"+addr)
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("request %d: status %d, want 204", i, resp.StatusCode)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("took %d connections, want 2 (the first dropped for the bytes past its answer, the second kept)", n)
	}
}

// closeCounter is a request body that counts its closes.
type closeCounter struct {
	io.Reader
	closes atomic.Int64
}

func (b *closeCounter) Close() error { b.closes.Add(1); return nil }

func TestATargetDownOrClosingWithoutAnAnswerFailsTheRequest(t *testing.T) {
	down := testenv.FreeAddr(t) // nothing listens there
	closing := testenv.ServeTCP(t, func(nc net.Conn) {
		_, _ = http.ReadRequest(bufio.NewReader(nc))
		_ = nc.Close()
	})
	tr := plainhttp.New(plainhttp.Options{Fallback: unused{t}})
	for _, tc := range []struct{ addr, want string }{
		{down, "connection refused"},
		{closing, "reading the answer: the target closed the connection before it answered in full"},
	} {
		b := &closeCounter{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest(http.MethodPost, "http://"+tc.addr, b)
		req.ContentLength = 1
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.addr, err, tc.want)
		}
		if n := b.closes.Load(); n == 0 {
			t.Errorf("%s: the request's body was not closed", tc.addr)
		}
	}
}
