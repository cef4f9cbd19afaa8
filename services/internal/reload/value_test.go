package reload_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/reload"
	"github.com/resched/resched/services/internal/testenv"
)

// A value follows its file: read again when the file changes, kept when the new content does
// not read (said once, not at every Get), and kept while the file is gone for a moment.
func TestValueFollowsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write := func(content string) { t.Helper(); testenv.WriteNewer(t, path, []byte(content)) }
	write("1")
	var said []string
	changed := func(err error) {
		if err != nil {
			said = append(said, "failed")
			return
		}
		said = append(said, "read")
	}
	v, err := reload.New(func() (int, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(string(b)))
	}, changed, path)
	if err != nil || v.Get() != 1 {
		t.Fatalf("first read: %v", err)
	}
	write("2")
	if got := v.Get(); got != 2 {
		t.Fatalf("after a change, %d, want 2", got)
	}
	write("two")
	if got, again := v.Get(), v.Get(); got != 2 || again != 2 {
		t.Fatalf("after a change that does not read, %d and %d, want 2 kept", got, again)
	}
	write("3")
	if got := v.Get(); got != 3 {
		t.Fatalf("after a good change again, %d, want 3", got)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := v.Get(); got != 3 {
		t.Fatalf("with the file gone, %d, want 3 kept", got)
	}
	if strings.Join(said, ",") != "read,failed,read" {
		t.Errorf("changes said: %v, want read, failed, read", said)
	}
	if _, err := reload.New(func() (int, error) { return 0, nil }, nil, path); err == nil {
		t.Error("a value of a file that is not there was made")
	}
}

// A text is its file's without the line ending; an empty file keeps the text read before.
func TestTextFollowsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "password")
	testenv.WriteNewer(t, path, []byte("old\n"))
	v, err := reload.NewText(path, nil)
	if err != nil || v.Get() != "old" {
		t.Fatalf("first read: %v", err)
	}
	testenv.WriteNewer(t, path, []byte("new\r\n"))
	if got := v.Get(); got != "new" {
		t.Fatalf("after a rotation, %q, want new", got)
	}
	testenv.WriteNewer(t, path, nil)
	if got := v.Get(); got != "new" {
		t.Fatalf("after the file was emptied, %q, want new kept", got)
	}
}
