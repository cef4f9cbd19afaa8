package tlstest

import (
	"os"
	"testing"

	"github.com/resched/resched/services/internal/testenv"
)

// Renew writes the file from over the file to, as a certificate renewed on disk is, dated past
// to's last version (testenv.WriteNewer).
func Renew(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	testenv.WriteNewer(t, to, b)
}
