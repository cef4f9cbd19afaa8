// Package testenv is what the tests share: where the repository and its test emulators are, a
// bounded buffer for a child process's output and a whole one for a test's logs, and
// Eventually, the one way a test waits for a condition that other processes or goroutines
// bring about.
package testenv

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RepoRoot is the directory holding go.work, found from the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.work above the working directory: cannot find the repository root")
		}
		dir = parent
	}
}

// EmulatorsDir is scripts/emulators, where Azurite and the fake Service Bus broker live.
func EmulatorsDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(RepoRoot(t), "scripts", "emulators")
}

// Tail keeps the last part of a child's output for failure reports.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 16 << 10

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = t.buf[len(t.buf)-tailSize:]
	}
	return len(p), nil
}

func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// ProcessCPU is the CPU time this test process has used so far (user and system): the
// benchmarks that embed the JetStream server report it per operation.
func ProcessCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Eventually polls cond until it holds, failing the test when it still does not after within.
// It waits for other goroutines and processes to make progress, never for test time to pass:
// a test that drives a clock sets the clock. detail, when given, says on failure what was seen
// last.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	// The wait between two looks starts short, for conditions that hold soon, and grows, so
	// that a condition which costs something to check (a process to start) is not checked
	// a hundred times a second.
	wait := 10 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			msg := "not within " + within.String() + ": " + what
			for _, d := range detail {
				msg += "; " + d()
			}
			t.Fatal(msg)
		}
		time.Sleep(wait)
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// Parallel runs work(0) … work(workers-1) side by side, waits for all of them and fails the
// test with the errors they returned.
func Parallel(t testing.TB, workers int, work func(worker int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			if err := work(w); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// Status is the status code of a GET of url, 0 when it could not be sent (a process not yet
// listening, one that hangs past 5 s).
func Status(url string) int {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// SkipUnderRace skips a test whose subject is speed (a burst within a deadline) under the race
// detector, which runs code about ten times slower: make test runs it without.
func SkipUnderRace(t testing.TB, why string) {
	t.Helper()
	if RaceDetector {
		t.Skip("not under the race detector: " + why)
	}
}
