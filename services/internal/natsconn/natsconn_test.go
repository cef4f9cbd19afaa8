package natsconn_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/natsconn"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
)

func withUser(name, password string) natstest.Option {
	return func(o *server.Options) { o.Users = []*server.User{{Username: name, Password: password}} }
}

func connect(t *testing.T, o natsconn.Options) (*natsconn.Conn, *testenv.LogBuffer) {
	t.Helper()
	logs := &testenv.LogBuffer{}
	c, err := natsconn.Connect(o, "test", slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, logs
}

// Credentials the server never accepted are a wrong configuration: liveness fails at once and
// the log names the refusal and who was refused, never the password.
func TestWrongCredentialsFailLivenessAtOnce(t *testing.T) {
	srv := natstest.Start(t, withUser("svc", "right-pw"))
	c, logs := connect(t, natsconn.Options{URL: srv.ClientURL(), User: "svc", Password: "wrong-pw"})
	testenv.Eventually(t, 10*time.Second, "liveness to fail", func() bool { return c.Live(context.Background()) != nil })
	err := c.Live(context.Background())
	if !strings.Contains(err.Error(), "authorization") || !strings.Contains(err.Error(), `user "svc"`) {
		t.Errorf("liveness: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "authorization violation") || !strings.Contains(l, `svc`) || strings.Contains(l, "wrong-pw") {
		t.Errorf("log:\n%s", l)
	}
	if c.IsClosed() {
		t.Error("the connection gave up; it must keep trying")
	}
}

// A server that stops accepting the credentials (a configuration reloaded with another
// password) makes the service keep trying: it stays live for the grace period, then fails
// liveness, and once the server accepts it again it reconnects and is live again.
func TestRefusedCredentialsAreRetriedAndRecover(t *testing.T) {
	srv := natstest.Start(t, withUser("svc", "pw-1"))
	c, logs := connect(t, natsconn.Options{URL: srv.ClientURL(), User: "svc", Password: "pw-1", AuthGrace: time.Second})
	testenv.Eventually(t, 5*time.Second, "connected", func() bool { return c.Status() == nats.CONNECTED })

	srv.Reload(withUser("svc", "pw-2"))
	testenv.Eventually(t, 10*time.Second, "the refusal to be logged", func() bool { return strings.Contains(logs.String(), "authorization violation") })
	testenv.Eventually(t, 10*time.Second, "liveness to fail after the grace period", func() bool { return c.Live(context.Background()) != nil })
	if c.IsClosed() {
		t.Fatal("the connection gave up")
	}

	srv.Reload(withUser("svc", "pw-1"))
	testenv.Eventually(t, 10*time.Second, "reconnected and live", func() bool {
		return c.Status() == nats.CONNECTED && c.Live(context.Background()) == nil
	}, logs.String)
}

// A password or token read from a file is read again at each connection attempt: the server
// comes to accept only a new one, the file is rotated in place, and the service reconnects
// with it, without a restart. Read once, it was refused until its liveness failed.
func TestARotatedSecretFileIsUsedOnTheNextConnection(t *testing.T) {
	for _, c := range []struct {
		name string
		with func(secret string) natstest.Option
		opts func(secret, file string) natsconn.Options
	}{
		{"password", func(pw string) natstest.Option { return withUser("svc", pw) }, func(pw, file string) natsconn.Options {
			return natsconn.Options{User: "svc", Password: pw, PasswordFile: file}
		}},
		{"token", func(token string) natstest.Option {
			return func(o *server.Options) { o.Authorization = token }
		}, func(token, file string) natsconn.Options { return natsconn.Options{Token: token, TokenFile: file} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := natstest.Start(t, c.with("secret-1"))
			file := filepath.Join(t.TempDir(), c.name)
			testenv.WriteNewer(t, file, []byte("secret-1\n"))
			o := c.opts("secret-1", file)
			o.URL = srv.ClientURL()
			conn, logs := connect(t, o)
			testenv.Eventually(t, 5*time.Second, "connected", func() bool { return conn.Status() == nats.CONNECTED })

			testenv.WriteNewer(t, file, []byte("secret-2\n"))
			srv.Reload(c.with("secret-2"))
			testenv.Eventually(t, 10*time.Second, "reconnected with the rotated secret", func() bool {
				return conn.Status() == nats.CONNECTED && conn.Live(context.Background()) == nil && conn.Reconnects > 0
			}, logs.String)
			if l := logs.String(); strings.Contains(l, "secret-") {
				t.Errorf("the log holds the secret:\n%s", l)
			}
		})
	}
}

// A token in the URL is used, as before, when a token file is set too: nats.go refuses a
// token handler beside the URL's credentials, and would never connect.
func TestATokenInTheURLWinsOverATokenFile(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) { o.Authorization = "url-token" })
	file := filepath.Join(t.TempDir(), "token")
	testenv.WriteNewer(t, file, []byte("file-token\n"))
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://url-token@", 1)
	conn, logs := connect(t, natsconn.Options{URL: url, Token: "file-token", TokenFile: file})
	testenv.Eventually(t, 5*time.Second, "connected with the URL's token", func() bool { return conn.Status() == nats.CONNECTED }, logs.String)
}

// A password or token file gone between the start's reading and the connection is an error
// that names it, not a connection without credentials.
func TestAMissingSecretFileFailsTheConnection(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	for what, o := range map[string]natsconn.Options{
		"NATS password": {URL: "nats://127.0.0.1:1", User: "svc", Password: "pw", PasswordFile: missing},
		"NATS token":    {URL: "nats://127.0.0.1:1", Token: "tok", TokenFile: missing},
	} {
		if c, err := natsconn.Connect(o, "test", nil); err == nil || !strings.Contains(err.Error(), what) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s file missing: %v, want an error naming it", what, err)
		}
	}
}

// A server that hangs (the link frozen: the connection open, nothing answered) is given up
// within seconds, so that a planner lets its partitions go and a client moves to another
// server of a cluster. With nats.go's default pings it took more than two minutes.
func TestAServerThatHangsIsGivenUpWithinSeconds(t *testing.T) {
	srv := natstest.Start(t)
	link := testenv.StartProxy(t, srv.Addr().String())
	c, logs := connect(t, natsconn.Options{URL: "nats://" + link.Addr()})
	testenv.Eventually(t, 5*time.Second, "connected", func() bool { return c.Status() == nats.CONNECTED })
	link.Freeze()
	frozen := time.Now()
	testenv.Eventually(t, 10*time.Second, "the hung server to be given up", func() bool { return !c.IsConnected() })
	t.Logf("given up %v after the freeze", time.Since(frozen).Round(100*time.Millisecond))
	if !strings.Contains(logs.String(), "stale connection") {
		t.Errorf("log:\n%s", logs.String())
	}
	link.Thaw()
	testenv.Eventually(t, 10*time.Second, "reconnected once it answers", func() bool { return c.IsConnected() })
}

// A request in flight when its connection is given up ends then, not at its deadline: the
// answer would come to the connection that is gone. Once the link answers again, requests are
// answered.
func TestARequestInFlightEndsWhenItsConnectionIsLost(t *testing.T) {
	srv := natstest.Start(t)
	responder := srv.Connect(t)
	answer := make(chan struct{})
	if _, err := responder.Subscribe("svc", func(m *nats.Msg) {
		select {
		case <-answer:
			_ = m.Respond([]byte("ok"))
		default: // the first request is never answered
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}
	link := testenv.StartProxy(t, srv.Addr().String())
	c, _ := connect(t, natsconn.Options{URL: "nats://" + link.Addr()})
	testenv.Eventually(t, 5*time.Second, "connected", func() bool { return c.Status() == nats.CONNECTED })
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.RequestMsgWithContext(ctx, nats.NewMsg("svc"))
		got <- err
	}()
	link.Freeze()
	if err := <-got; !errors.Is(err, natsconn.ErrConnectionLost) {
		t.Fatalf("the request in flight ended with %v, want %v", err, natsconn.ErrConnectionLost)
	}
	close(answer)
	link.Thaw()
	testenv.Eventually(t, 10*time.Second, "reconnected", func() bool { return c.IsConnected() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if reply, err := c.RequestMsgWithContext(ctx, nats.NewMsg("svc")); err != nil || string(reply.Data) != "ok" {
		t.Fatalf("a request after the reconnection: %v", err)
	}
}

// A connection to a server cut off from the rest of its cluster stays up (the server answers
// pings) while JetStream cannot be reached through it; the watch moves it to another server.
func TestAServerCutOffFromJetStreamIsLeft(t *testing.T) {
	cl := natstest.StartPartitionableCluster(t, 3)
	c, logs := connect(t, natsconn.Options{URL: cl.URLs()})
	testenv.Eventually(t, 5*time.Second, "connected", func() bool { return c.IsConnected() })
	js, err := jetstream.New(c.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	go c.WatchJetStream(ctx, natsconn.StreamLed(js, "S"), slog.New(slog.NewTextHandler(logs, nil)))
	cut := c.ConnectedServerName()
	cl.Isolate(cl.Index(cut))
	testenv.Eventually(t, 30*time.Second, "the connection moved off the server cut off", func() bool {
		return c.IsConnected() && c.ConnectedServerName() != cut
	}, func() string { return logs.String() })
	if !strings.Contains(logs.String(), "JetStream cannot be reached through this NATS server") {
		t.Errorf("log:\n%s", logs.String())
	}
	// When the server cut off led the stream, the others elect a leader meanwhile.
	var err2 error
	testenv.Eventually(t, 20*time.Second, "a publish to the stream through the new server", func() bool {
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		defer pcancel()
		_, err2 = js.Publish(pctx, "s.a", nil)
		return err2 == nil
	}, func() string { return fmt.Sprint(err2) })
}

// NATS_PING_INTERVAL reaches the connection, for a link whose round trip nears the default's
// second; unset, the default.
func TestPingIntervalIsASetting(t *testing.T) {
	srv := natstest.Start(t)
	for _, c := range []struct {
		set, want time.Duration
	}{{0, natsconn.DefaultPingInterval}, {5 * time.Second, 5 * time.Second}} {
		conn, _ := connect(t, natsconn.Options{URL: srv.ClientURL(), PingInterval: c.set})
		if got := conn.Opts.PingInterval; got != c.want {
			t.Errorf("ping interval set to %v: the connection pings every %v, want %v", c.set, got, c.want)
		}
		if got := conn.Opts.MaxPingsOut; got != 2 {
			t.Errorf("%d pings may go unanswered, want 2", got)
		}
	}
	o := natsconn.Options{}
	for _, s := range o.Settings() {
		if s.Env == "NATS_PING_INTERVAL" {
			if err := s.Value.Set("50ms"); err == nil {
				t.Error("a ping interval of 50ms is taken; the least is 100ms")
			}
			return
		}
	}
	t.Error("no NATS_PING_INTERVAL setting")
}

// Requests through a server cut off from the rest of its cluster find no responder (the
// planners are on the other side) while the connection stays up; after three in a row the
// connection moves to another server, and requests are answered again.
func TestRequestsNobodyTakesMoveTheConnection(t *testing.T) {
	cl := natstest.StartPartitionableCluster(t, 3)
	c, logs := connect(t, natsconn.Options{URL: cl.URLs()})
	testenv.Eventually(t, 5*time.Second, "connected", func() bool { return c.IsConnected() })
	cut := cl.Index(c.ConnectedServerName())
	responder, err := nats.Connect(cl.URL((cut + 1) % 3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(responder.Close)
	if _, err := responder.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	ask := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.RequestMsgWithContext(ctx, nats.NewMsg("svc"))
		return err
	}
	testenv.Eventually(t, 10*time.Second, "the responder reached", func() bool { return ask() == nil })
	cl.Isolate(cut)
	testenv.Eventually(t, 5*time.Second, "no responder through the server cut off", func() bool {
		return errors.Is(ask(), nats.ErrNoResponders)
	})
	var last error
	testenv.Eventually(t, 20*time.Second, "answered again", func() bool {
		last = ask()
		return last == nil
	}, func() string { return fmt.Sprint(last, "\n", logs.String()) })
	if c.ConnectedServerName() == cl.Servers[cut].Name() || !strings.Contains(logs.String(), "no responder through this NATS server") {
		t.Errorf("connected to %s (cut off: n%d); log:\n%s", c.ConnectedServerName(), cut, logs.String())
	}
}

// A stop drains the connection: the log says it was closed, not that it was lost (a warning
// at every stop of make run before).
func TestADrainedConnectionIsNotLoggedAsLost(t *testing.T) {
	srv := natstest.Start(t)
	c, logs := connect(t, natsconn.Options{URL: srv.ClientURL()})
	testenv.Eventually(t, 10*time.Second, "the connection up", func() bool { return c.Live(context.Background()) == nil })
	if err := c.Drain(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the connection closed", func() bool { return strings.Contains(logs.String(), "nats connection closed") })
	if l := logs.String(); strings.Contains(l, "nats disconnected") || strings.Contains(l, "level=WARN") {
		t.Errorf("a drained connection logged:\n%s", l)
	}
}
