// Package redistest runs a real redis-server process for a test: on a free port, with its
// data in the test's temporary directory, stopped by t.Cleanup. The binary comes from PATH
// (.ci/run installs it); a test that needs Redis fails with a clear message when it is missing
// rather than skipping, so CI can never pass without having run it.
package redistest

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/tlstest"
)

// Server is a redis-server child process.
type Server struct {
	// Addr is where clients reach the server: where it listens, or a proxy in front of it.
	Addr string
	// listen is where the server listens when a proxy is in front of it.
	listen string
	// CA and ClientCert are the TLS files a client needs, with WithTLS.
	CA         string
	ClientCert tlstest.Pair
	dir        string
	args       []string
	client     redis.Options // how the test's clients (and the readiness check) connect
	tls        bool
	conf       string // a configuration file, first on the command line
	cmd        *exec.Cmd
	t          testing.TB
}

// Option changes how the server runs.
type Option func(*Server)

// WithPersistence turns on the append-only file (fsync every second), so Restart keeps the data.
func WithPersistence() Option {
	return func(s *Server) { s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "everysec") }
}

// WithACLUser adds an ACL user allowed everything, turns the default user off, and makes the
// test's clients log in as that user: a server a client must authenticate to.
func WithACLUser(name, password string) Option {
	return func(s *Server) {
		s.args = append(s.args, "--user", "default", "off", "--user", name, "on", ">"+password, "~*", "&*", "+@all")
		s.client.Username, s.client.Password = name, password
	}
}

// WithTLS serves TLS only, with a server certificate of ca, and requires client certificates
// signed by ca; the test's clients present one (ClientCert).
func WithTLS(ca *tlstest.CA) Option {
	return func(s *Server) {
		server := ca.Server(s.t, "redis-server")
		s.CA, s.ClientCert, s.tls = ca.CertFile, ca.Client(s.t, "redis-client"), true
		s.args = append(s.args, "--tls-cert-file", server.CertFile, "--tls-key-file", server.KeyFile,
			"--tls-ca-cert-file", ca.CertFile, "--tls-auth-clients", "yes")
		cert, err := tls.LoadX509KeyPair(s.ClientCert.CertFile, s.ClientCert.KeyFile)
		if err != nil {
			s.t.Fatalf("redistest: %v", err)
		}
		pem, err := os.ReadFile(ca.CertFile)
		if err != nil {
			s.t.Fatalf("redistest: %v", err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		s.client.TLSConfig = &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
}

// WithArgs adds redis-server arguments.
func WithArgs(args ...string) Option {
	return func(s *Server) { s.args = append(s.args, args...) }
}

// Start starts a redis-server for the test.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found on PATH (install it: apt-get install redis-server): %v", err)
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), dir: t.TempDir(), t: t,
		args: []string{"--save", "", "--appendonly", "no"}}
	for _, o := range opts {
		o(s)
	}
	ports := []string{"--port", s.port()}
	if s.tls {
		ports = []string{"--port", "0", "--tls-port", s.port()}
	}
	s.args = append(append(ports, "--bind", s.host(), "--dir", s.dir, "--protected-mode", "no", "--loglevel", "warning"), s.args...)
	if s.conf != "" {
		s.args = append([]string{s.conf}, s.args...)
	}
	s.client.Addr = s.Addr
	s.start(bin)
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) port() string { _, p, _ := net.SplitHostPort(cmp.Or(s.listen, s.Addr)); return p }

func (s *Server) host() string { h, _, _ := net.SplitHostPort(cmp.Or(s.listen, s.Addr)); return h }

// behind makes the server listen on listen, its clients reaching it at addr, a proxy.
func behind(listen, addr string) Option {
	return func(s *Server) { s.listen, s.Addr = listen, addr }
}

func (s *Server) start(bin string) {
	s.t.Helper()
	s.cmd = exec.Command(bin, s.args...)
	logPath := filepath.Join(s.dir, "redis-server.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	defer logFile.Close()
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start redis-server: %v", err)
	}
	c := redis.NewClient(s.options())
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: redis-server on %s not ready: %v\n%s", s.Addr, err, testenv.TailOf(logPath, 4<<10))
		}
		time.Sleep(20 * time.Millisecond) // polling a child process's readiness, not waiting for test time
	}
}

// stopWait bounds how long Stop waits for redis-server to exit after SIGTERM. A master waits up
// to its shutdown-timeout (10 s) for its replicas.
const stopWait = 30 * time.Second

// Stop stops the server (SIGTERM, so it flushes its append-only file) and waits for it. Redis
// refuses a SIGTERM that comes while it writes its first append-only file (a replica does
// right after its first sync) and then forgets it: it kept running, and a make test waited for
// it until its 10-minute time-out. So the signal is sent again every half second; a server
// still running after stopWait is killed, and its log shown.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	give := time.After(stopWait)
	for {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			s.cmd = nil
			return
		case <-time.After(500 * time.Millisecond): // a child process's shutdown, not test time
			continue
		case <-give:
			s.t.Logf("redistest: redis-server on %s still running %v after SIGTERM: killed. Its log:\n%s",
				s.Addr, stopWait, testenv.TailOf(filepath.Join(s.dir, "redis-server.log"), 4<<10))
			_ = s.cmd.Process.Kill()
			<-done
			s.cmd = nil
			return
		}
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server with SIGSTOP: its connections stay open and nothing answers, as a
// frozen virtual machine or a network that drops packets; Resume lets it go on.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server go on.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	pid := s.PID()
	if pid == 0 { // kill(0) would signal the test's own process group
		s.t.Fatalf("redistest: %v to %s: it does not run", sig, s.Addr)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		s.t.Fatalf("redistest: %v to %s: %v", sig, s.Addr, err)
	}
}

// PID is the server's process id; 0 while it does not run.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the server process runs.
func (s *Server) Running() bool { return s.cmd != nil }

// Start again a server that was stopped or killed, on its port and directory.
func (s *Server) Start() {
	s.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	s.start(bin)
}

// Restart stops the server and starts it again on the same port and directory.
func (s *Server) Restart() {
	s.t.Helper()
	bin := s.cmd.Path
	s.Stop()
	s.start(bin)
}

// Client returns a client for the server, closed at the end of the test.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *Server) options() *redis.Options {
	o := s.client
	return &o
}

// URL returns the URL of the server: rediss:// with WithTLS, with the user and password of
// WithACLUser.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr, Path: "/0"}
	if s.tls {
		u.Scheme = "rediss"
	}
	if s.client.Username != "" {
		u.User = url.UserPassword(s.client.Username, s.client.Password)
	}
	return u.String()
}

// CPU is the CPU time the redis-server behind rdb has used so far (user and system), for
// benchmarks that report Redis's share of the work: it runs in its own process, outside the Go
// profile.
func CPU(t testing.TB, rdb *redis.Client) time.Duration {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return cpuOf(info)
}

// CPU is the CPU time the server has used so far (user and system).
func (s *Server) CPU(t testing.TB) time.Duration {
	t.Helper()
	info, err := s.do("INFO", "cpu")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return cpuOf(info)
}

// cpuOf adds the used_cpu_sys and used_cpu_user lines of an INFO cpu answer.
func cpuOf(info string) time.Duration {
	var total float64
	for _, line := range strings.Split(info, "\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// Dir is the server's data directory (its dump and append-only files), for tests that read
// what rests on disk.
func (s *Server) Dir() string { return s.dir }
