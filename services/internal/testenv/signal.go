package testenv

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// StopsOnSignal checks a service's stop on a signal: it starts cmd (the service run with
// -log-level debug, its JSON logs on standard output), waits for the record whose message is
// ready, sends sig, and checks that the service exits 0 after a record whose message is
// stopped, that its start record carries the flag-set log level, and that no line holds
// secret (a password the test put in a URL).
func StopsOnSignal(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, ready, stopped, secret string) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var before strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		before.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), `"msg":"`+ready+`"`) {
			break
		}
	}
	if !strings.Contains(before.String(), `"msg":"`+ready+`"`) {
		_ = cmd.Process.Kill()
		t.Fatalf("no %q record:\n%s", ready, before.String())
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	all := before.String() + string(rest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exited with %v after %v, want status 0:\n%s", err, sig, all)
	}
	if strings.Contains(all, secret) {
		t.Errorf("the logs hold the secret %q:\n%s", secret, all)
	}
	if !strings.Contains(before.String(), `"log_level":"DEBUG"`) {
		t.Errorf("the start record lacks the flag-set log level:\n%s", before.String())
	}
	if !strings.Contains(string(rest), `"msg":"`+stopped+`"`) {
		t.Errorf("no %q record after %v:\n%s", stopped, sig, rest)
	}
}
