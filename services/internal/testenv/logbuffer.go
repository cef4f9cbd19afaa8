package testenv

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// LogBuffer is a log destination that the goroutines of a test's services may write to at
// once, and the test read whole (a Tail keeps only the end).
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records decodes the JSON log records written so far.
func (b *LogBuffer) Records(t testing.TB) []map[string]any {
	t.Helper()
	return LogRecords(t, b.String())
}

// LogRecords decodes JSON log records, one a line; a line that is not JSON fails the test.
func LogRecords(t testing.TB, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}
