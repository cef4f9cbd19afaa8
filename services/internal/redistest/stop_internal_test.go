package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Redis refuses a SIGTERM that comes while it writes its first append-only file, and forgets
// it; Stop sends it again, so the server exits by itself (its data flushed) once the file is
// written. The file's writing is slowed (rdb-key-save-delay, the setting Redis's own tests use)
// so that the first SIGTERM surely comes during it.
func TestStopWhileTheFirstAppendOnlyFileIsWritten(t *testing.T) {
	s := Start(t)
	c := s.Client(t)
	ctx := t.Context()
	for i := range 5 {
		if err := c.Set(ctx, fmt.Sprint("k", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range [][2]string{{"rdb-key-save-delay", "200000"}, {"appendonly", "yes"}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.Stop()
	b, err := os.ReadFile(filepath.Join(s.dir, "redis-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if !strings.Contains(log, "can't exit") {
		t.Fatalf("the first SIGTERM was not refused, so the case is not tested:\n%s", log)
	}
	if !strings.Contains(log, "ready to exit") {
		t.Fatalf("redis-server did not exit by itself:\n%s", log)
	}
}
