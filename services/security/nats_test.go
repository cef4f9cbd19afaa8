package security

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// nkeyUser makes an nkey user and writes its seed to a file; it returns the public key and
// the file.
func nkeyUser(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	return pub, writeFile(t, dir, name+".nk", seed)
}

func TestNKeyUsers(t *testing.T) {
	dir := t.TempDir()
	svcPub, svcSeed := nkeyUser(t, dir, "service")
	clientPub, clientSeed := nkeyUser(t, dir, "client")
	srv := natstest.Start(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: svcPub}, {Nkey: clientPub}} })
	if _, err := nats.Connect(srv.ClientURL()); err == nil {
		t.Fatal("the server lets in a client without an nkey: the test would prove nothing")
	}
	sc := run(t, setup{natsURL: srv.ClientURL(), planner: []string{"NATS_NKEY=" + svcSeed}, worker: []string{"NATS_NKEY=" + svcSeed},
		client: []string{"NATS_NKEY=" + clientSeed}, redis: []string{"REDIS_URL=" + redistest.Start(t).URL()}})
	sc.deliver(t, "c", "nkey", "pw-nkey")
	if !sc.planner.logged(`"identity":"nkey ` + svcPub + `"`) {
		t.Error("the planner does not log its nkey identity")
	}
}

// operator is an operator-mode NATS trust chain: an operator, a system account and an account
// whose users are signed by the account's key.
type operator struct {
	claims   *jwt.OperatorClaims
	resolver *server.MemAccResolver
	sysPub   string
	account  nkeys.KeyPair
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	o := &operator{claims: jwt.NewOperatorClaims(opPub), resolver: &server.MemAccResolver{}}
	sys, _ := nkeys.CreateAccount()
	o.sysPub, _ = sys.PublicKey()
	o.claims.SystemAccount = o.sysPub
	o.account, _ = nkeys.CreateAccount()
	accPub, _ := o.account.PublicKey()
	for pub, name := range map[string]string{o.sysPub: "SYS", accPub: "RESCHED"} {
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if name == "RESCHED" {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		token, err := ac.Encode(op)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.resolver.Store(pub, token); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func (o *operator) options(opts *server.Options) {
	opts.TrustedOperators = []*jwt.OperatorClaims{o.claims}
	opts.AccountResolver = o.resolver
	opts.SystemAccount = o.sysPub
}

// creds issues a new user of the account, valid until expires (zero: no end), as the contents
// of a .creds file.
func (o *operator) creds(t *testing.T, name string, expires time.Time) []byte {
	t.Helper()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	if !expires.IsZero() {
		uc.Expires = expires.Unix()
	}
	token, err := uc.Encode(o.account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	b, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Operator mode with .creds files; the services' credentials expire while they run and are
// rotated in place (a new user in the same file): they reconnect with the new ones and the
// job keeps being delivered, without a restart.
func TestOperatorModeCredsAndRotation(t *testing.T) {
	dir := t.TempDir()
	op := newOperator(t)
	srv := natstest.Start(t, op.options)
	expires := time.Now().Add(8 * time.Second).Truncate(time.Second)
	planner := writeFile(t, dir, "planner.creds", op.creds(t, "planner", expires))
	worker := writeFile(t, dir, "worker.creds", op.creds(t, "worker", expires))
	client := writeFile(t, dir, "client.creds", op.creds(t, "team", time.Time{}))
	sc := run(t, setup{natsURL: srv.ClientURL(), planner: []string{"NATS_CREDS=" + planner}, worker: []string{"NATS_CREDS=" + worker},
		client: []string{"NATS_CREDS=" + client}, redis: []string{"REDIS_URL=" + redistest.Start(t).URL()}})
	sc.deliver(t, "c", "creds", "pw-creds")
	if !sc.planner.logged(`user \"planner\"`) {
		t.Error("the planner does not log the user of its .creds file")
	}
	if time.Now().After(expires.Add(-time.Second)) {
		t.Fatal("the start took too long: the credentials expired before they could be rotated")
	}

	// Rotation: new users in the same files, before the old ones expire.
	writeFile(t, dir, "planner.creds", op.creds(t, "planner-2", time.Time{}))
	writeFile(t, dir, "worker.creds", op.creds(t, "worker-2", time.Time{}))
	for _, s := range []*service{sc.planner, sc.worker} {
		testenv.Eventually(t, 30*time.Second, s.Name+" disconnected by the expiry and reconnected", func() bool {
			return s.logged("nats disconnected") && s.logged("nats reconnected")
		}, s.Tail)
	}
	after := time.Now()
	sc.target.waitDelivery(t, "/c/creds", after)
	if !sc.planner.Running() || !sc.worker.Running() {
		t.Fatal("a service exited over the rotation")
	}
}

// TLS with a private CA, and mutual TLS: the server requires a client certificate of the CA.
func TestTLSWithAPrivateCAAndClientCertificates(t *testing.T) {
	ca := tlstest.NewCA(t, "nats")
	pair := ca.Server(t, "nats-server")
	srv := natstest.Start(t, func(o *server.Options) {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pair.CertFile, KeyFile: pair.KeyFile, CaFile: ca.CertFile, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true
	})
	url := strings.Replace(srv.ClientURL(), "nats://", "tls://", 1)
	if _, err := nats.Connect(url, nats.RootCAs(ca.CertFile)); err == nil {
		t.Fatal("the server lets in a client without a certificate: the test would prove nothing")
	}
	if _, err := nats.Connect(url, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12})); err == nil {
		t.Fatal("a client that does not trust the private CA got in")
	}
	tlsEnv := func(name string) []string {
		c := ca.Client(t, name)
		return []string{"NATS_CA=" + ca.CertFile, "NATS_CERT=" + c.CertFile, "NATS_KEY=" + c.KeyFile}
	}
	sc := run(t, setup{natsURL: url, planner: tlsEnv("planner"), worker: tlsEnv("worker"), client: tlsEnv("schedctl"),
		redis: []string{"REDIS_URL=" + redistest.Start(t).URL()}})
	sc.deliver(t, "c", "tls", "pw-tls")
}

func withUsers(pw map[string]string) natstest.Option {
	return func(o *server.Options) {
		o.Users = nil
		for u, p := range pw {
			o.Users = append(o.Users, &server.User{Username: u, Password: p})
		}
	}
}

// Wrong NATS credentials: the service is not healthy and its log says authorization, never the
// password.
func TestWrongCredentialsAreLoud(t *testing.T) {
	srv := natstest.Start(t, withUsers(map[string]string{"planner": "right-pw", "worker": "right-pw"}))
	dir := t.TempDir()
	rdb := redistest.Start(t)
	planner := start(t, dir, "planner", "planner", "NATS_URL="+srv.ClientURL(), "NATS_USER=planner", "NATS_PASSWORD=wrong-pw-1", "REDIS_URL="+rdb.URL())
	worker := start(t, dir, "worker", "worker", "NATS_URL="+srv.ClientURL(), "NATS_USER=worker", "NATS_PASSWORD=wrong-pw-2")
	for _, s := range []*service{planner, worker} {
		testenv.Eventually(t, 30*time.Second, s.Name+" unhealthy", func() bool { return s.status("/healthz") == 503 }, s.Tail)
		if s.status("/readyz") != 503 {
			t.Errorf("%s is ready with refused credentials", s.Name)
		}
		log := testenv.TailOf(s.Log, 1<<20)
		if !strings.Contains(log, "authorization violation") || !strings.Contains(log, `user \"`+s.Name+`\"`) {
			t.Errorf("%s's log does not name the refusal and the user:\n%s", s.Name, log)
		}
		if strings.Contains(log, "wrong-pw") {
			t.Errorf("%s logged its password", s.Name)
		}
	}

	// A wrong Redis password fails the planner's readiness and says WRONGPASS.
	acl := redistest.Start(t, redistest.WithACLUser("resched", "redis-pw"))
	bad := strings.Replace(acl.URL(), "redis-pw", "not-it", 1)
	p2 := start(t, dir, "planner", "planner-2", "NATS_URL="+srv.ClientURL(), "NATS_USER=planner", "NATS_PASSWORD=right-pw", "REDIS_URL="+bad)
	testenv.Eventually(t, 30*time.Second, "the refusal logged", func() bool { return p2.logged("WRONGPASS") }, p2.Tail)
	if p2.status("/readyz") != 503 || p2.logged("not-it") {
		t.Error("the planner with a wrong Redis password is ready, or logged it")
	}
}

// A password changed on the server (a configuration reload) does not make the services exit:
// they say so and keep trying, and resume once the server accepts them again.
func TestCredentialsRefusedOnReloadAreRetried(t *testing.T) {
	users := map[string]string{"planner": "pw-p", "worker": "pw-w", "client": "pw-c"}
	srv := natstest.Start(t, withUsers(users))
	sc := run(t, setup{natsURL: srv.ClientURL(), planner: []string{"NATS_USER=planner", "NATS_PASSWORD=pw-p"},
		worker: []string{"NATS_USER=worker", "NATS_PASSWORD=pw-w"}, client: []string{"NATS_USER=client", "NATS_PASSWORD=pw-c"},
		redis: []string{"REDIS_URL=" + redistest.Start(t).URL()}})
	sc.deliver(t, "c", "reload", "pw-reload")

	srv.Reload(withUsers(map[string]string{"planner": "changed", "worker": "changed", "client": "pw-c"}))
	for _, s := range []*service{sc.planner, sc.worker} {
		testenv.Eventually(t, 15*time.Second, s.Name+" to log the refusal", func() bool { return s.logged("authorization violation") }, s.Tail)
	}
	// Several refused attempts each, over more than the 2 s in which they used to exit.
	for _, u := range []string{"planner", "worker"} {
		testenv.Eventually(t, 20*time.Second, u+" refused at least 4 times", func() bool {
			return srv.ErrorsLogged(`authentication error - User "`+u+`"`) >= 4
		})
	}
	if !sc.planner.Running() || !sc.worker.Running() {
		t.Fatal("a service exited when its credentials were refused")
	}

	srv.Reload(withUsers(users))
	sc.target.waitDelivery(t, "/c/reload", time.Now())
	for _, s := range []*service{sc.planner, sc.worker} {
		testenv.Eventually(t, 15*time.Second, s.Name+" ready again", func() bool { return s.status("/readyz") == 200 }, s.Tail)
	}
}
