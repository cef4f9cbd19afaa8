package testenv

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
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
