package tlstest

import (
	"os"
	"testing"
	"time"
)

// Renew writes the file from over the file to, as a certificate renewed on disk is, with a
// modification time a second past to's last one (or now): readers that look for a change by
// the time see one, without the test waiting for the file system's clock to move.
func Renew(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	at := time.Now()
	if info, err := os.Stat(to); err == nil && !info.ModTime().Before(at) {
		at = info.ModTime()
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	at = at.Add(time.Second)
	if err := os.Chtimes(to, at, at); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}
