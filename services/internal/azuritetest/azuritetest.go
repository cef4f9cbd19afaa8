// Package azuritetest runs Azurite, Microsoft's Azure Storage emulator, for a test: the queue
// service only, in memory, on a free loopback port, stopped by t.Cleanup. Azurite checks
// Shared Key and SAS signatures, permissions and protocol the way Azure does, so a deliverer
// tested against it is tested against real Storage Queue semantics.
//
// Azurite comes from scripts/emulators (pinned by its package-lock.json; .ci/run installs it
// with npm ci). A test that needs it fails, rather than skips, when Node or the package is
// missing, so CI can never pass without having run it.
package azuritetest

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/internal/tlstest"
)

// The well-known development account every Azurite instance has (it is public, not a secret).
const (
	Account    = "devstoreaccount1"
	AccountKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// startTimeout bounds how long Azurite may take to listen (it usually needs about a second).
const startTimeout = 30 * time.Second

// stopTimeout bounds a graceful stop before the process is killed.
const stopTimeout = 10 * time.Second

// Azurite is a running azurite-queue child process.
type Azurite struct {
	// Addr is host:port of the queue service.
	Addr   string
	scheme string       // http, or https with StartTLS
	client *http.Client // the helpers' transport: nil for the default, one trusting the CA with TLS
	cmd    *exec.Cmd
	out    *testenv.Tail
	done   chan struct{}
}

var listening = regexp.MustCompile(`successfully listens on https?://([0-9.]+:[0-9]+)`)

// Start starts Azurite's queue service for the test.
func Start(t testing.TB) *Azurite {
	t.Helper()
	return start(t, "http", nil)
}

// StartTLS starts it on HTTPS with a server certificate ca signs (a private CA), which the
// helpers trust; deliverers must be told to trust it too.
func StartTLS(t testing.TB, ca *tlstest.CA) *Azurite {
	t.Helper()
	server := ca.Server(t, "azurite")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	a := start(t, "https", &http.Client{Transport: tr}, "--cert", server.CertFile, "--key", server.KeyFile)
	t.Cleanup(tr.CloseIdleConnections)
	return a
}

func start(t testing.TB, scheme string, client *http.Client, args ...string) *Azurite {
	t.Helper()
	bin := filepath.Join(testenv.EmulatorsDir(t), "node_modules", ".bin", "azurite-queue")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("azuritetest: %s is missing: run `npm ci --prefix scripts/emulators` at the repository root (%v)", bin, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("azuritetest: node is not on PATH; install Node.js, then run `npm ci --prefix scripts/emulators`: %v", err)
	}
	cmd := exec.Command(bin, append([]string{"--queueHost", "127.0.0.1", "--queuePort", "0", "--inMemoryPersistence",
		"--extentMemoryLimit", "64", "--disableTelemetry", "--silent", "--skipApiVersionCheck"}, args...)...)
	cmd.Dir = t.TempDir() // Azurite may leave files in its working directory
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("azuritetest: %v", err)
	}
	a := &Azurite{scheme: scheme, client: client, cmd: cmd, out: &testenv.Tail{}, done: make(chan struct{})}
	cmd.Stderr = a.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("azuritetest: start azurite-queue: %v", err)
	}
	t.Cleanup(func() { a.stop(t) })
	addr := make(chan string, 1)
	go a.read(stdout, addr)
	select {
	case a.Addr = <-addr:
	case <-a.done:
		t.Fatalf("azuritetest: azurite-queue exited before listening:\n%s", a.out)
	case <-time.After(startTimeout):
		t.Fatalf("azuritetest: azurite-queue did not listen within %s:\n%s", startTimeout, a.out)
	}
	return a
}

// read scans Azurite's output for the listening line, then keeps draining it (a full pipe would
// block the child) into the tail shown when a test fails.
func (a *Azurite) read(r io.Reader, addr chan<- string) {
	defer close(a.done)
	s := bufio.NewScanner(r)
	for s.Scan() {
		_, _ = a.out.Write(append(s.Bytes(), '\n'))
		if m := listening.FindSubmatch(s.Bytes()); m != nil {
			select {
			case addr <- string(m[1]):
			default:
			}
		}
	}
}

func (a *Azurite) stop(t testing.TB) {
	testenv.Terminate(a.cmd.Process, a.done, stopTimeout)
	_ = a.cmd.Wait()
	if t.Failed() {
		t.Logf("azurite-queue output:\n%s", a.out)
	}
}

// Endpoint is the queue service URL template of the dev account, as storagequeue.Config wants
// it: path style, http://127.0.0.1:PORT/{account} (https with StartTLS).
func (a *Azurite) Endpoint() string { return a.scheme + "://" + a.Addr + "/{account}" }

// ServiceURL is the dev account's queue service URL.
func (a *Azurite) ServiceURL() string { return a.scheme + "://" + a.Addr + "/" + Account }

// Credential is the dev account's shared key.
func (a *Azurite) Credential(t testing.TB) *azqueue.SharedKeyCredential {
	t.Helper()
	c, err := azqueue.NewSharedKeyCredential(Account, AccountKey)
	if err != nil {
		t.Fatalf("azuritetest: credential: %v", err)
	}
	return c
}

// ClientOptions retries little and fast: tests want failures to surface at once.
func ClientOptions() *azqueue.ClientOptions {
	return &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond}}}
}

// Queue creates a queue in the dev account and returns a shared-key client for it.
func (a *Azurite) Queue(t testing.TB, name string) *azqueue.QueueClient {
	t.Helper()
	opts := ClientOptions()
	if a.client != nil {
		opts.Transport = a.client
	}
	svc, err := azqueue.NewServiceClientWithSharedKeyCredential(a.ServiceURL()+"/", a.Credential(t), opts)
	if err != nil {
		t.Fatalf("azuritetest: service client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := svc.CreateQueue(ctx, name, nil); err != nil {
		t.Fatalf("azuritetest: create queue %s: %v", name, err)
	}
	return svc.NewQueueClient(name)
}

// SASToken signs a service SAS for the queue with the dev account key. It allows plain HTTP
// (Azurite runs without TLS; QueueClient.GetSASURL would sign spr=https only).
func (a *Azurite) SASToken(t testing.TB, queue string, perms sas.QueuePermissions, expiry time.Time) string {
	t.Helper()
	cred, err := azqueue.NewSharedKeyCredential(Account, AccountKey)
	if err != nil {
		t.Fatalf("azuritetest: credential: %v", err)
	}
	qp, err := sas.QueueSignatureValues{Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: expiry.UTC(),
		Permissions: perms.String(), QueueName: queue}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatalf("azuritetest: sign SAS: %v", err)
	}
	return qp.Encode()
}
