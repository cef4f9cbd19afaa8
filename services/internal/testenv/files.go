package testenv

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FilesHolding walks dir and returns "path: needle" for every file that holds one of the
// needles, for the tests that look for secrets where they must not rest (a Redis dump, a
// JetStream store). A file that vanishes during the walk (a compaction) is skipped.
func FilesHolding(t testing.TB, dir string, needles ...string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				found = append(found, path+": "+n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: walk %s: %v", dir, err)
	}
	return found
}

// WriteNewer writes data over the file at path, dated a second past its last version (or
// now): code that looks for a change by a file's modification time sees one, without the test
// waiting for the file system's clock to move, as a file renewed minutes later would be.
func WriteNewer(t testing.TB, path string, data []byte) {
	t.Helper()
	at := time.Now()
	if info, err := os.Stat(path); err == nil && !info.ModTime().Before(at) {
		at = info.ModTime()
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Second)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}
