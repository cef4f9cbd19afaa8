package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/resched/resched/shared/job"
	"golang.org/x/text/encoding/unicode"
)

// The encodings Windows tools save text in, with their byte-order marks.
var windowsEncodings = []struct {
	name   string
	encode func(t *testing.T, s string) []byte
}{
	{"UTF-8 with BOM", func(_ *testing.T, s string) []byte { return append([]byte("\ufeff"), s...) }},
	{"UTF-16LE", func(t *testing.T, s string) []byte { return utf16(t, unicode.LittleEndian, s) }},
	{"UTF-16BE", func(t *testing.T, s string) []byte { return utf16(t, unicode.BigEndian, s) }},
}

func utf16(t *testing.T, order unicode.Endianness, s string) []byte {
	t.Helper()
	b, err := unicode.UTF16(order, unicode.UseBOM).NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A definition with a byte-order mark reads as the same UTF-8, a byte at a time too; text
// without one is not touched.
func TestUTF8Reader(t *testing.T) {
	const text = `{"body": "Grüße, 日本"}`
	for _, enc := range windowsEncodings {
		got, err := io.ReadAll(utf8Reader(iotest.OneByteReader(bytes.NewReader(enc.encode(t, text)))))
		if err != nil || string(got) != text {
			t.Errorf("%s: read %q (%v), want %q", enc.name, got, err, text)
		}
	}
	for _, plain := range []string{text, "", "\xef\xbb", "\xef\xbb{}", "\xfe{}"} { // no whole mark

		got, err := io.ReadAll(utf8Reader(strings.NewReader(plain)))
		if err != nil || string(got) != plain {
			t.Errorf("plain %q: read %q (%v)", plain, got, err)
		}
	}
}

// Definitions and exports saved by Windows tools are read by every command that reads a file:
// create and put (from a file and from standard input), preview, and import of a folder and
// of an Azure export. Before, each failed with "invalid character 'ï' looking for beginning of
// value".
func TestDefinitionsSavedByWindowsTools(t *testing.T) {
	p := startPlanner(t)
	dir := t.TempDir()
	t.Chdir(dir) // the import journal's default place
	p.mustRun(t, "", "collection", "create", "win")
	folder := filepath.Join(dir, "defs")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	var export []map[string]any
	for i, enc := range windowsEncodings {
		def := enc.encode(t, importDef)
		file := filepath.Join(dir, fmt.Sprintf("job-%d.json", i))
		if err := os.WriteFile(file, def, 0o644); err != nil {
			t.Fatal(err)
		}
		p.mustRun(t, "", "job", "create", fmt.Sprintf("win/file-%d", i), "-f", file)
		p.mustRun(t, string(def), "job", "put", fmt.Sprintf("win/stdin-%d", i), "-f", "-")
		if code, out, errOut := runPreviewWith(t, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), "", "-f", file, "-n", "1"); code != 0 || out != "2030-01-01T00:00:00Z\n" {
			t.Errorf("%s: preview exit %d: %s%s", enc.name, code, out, errOut)
		}
		if err := os.WriteFile(filepath.Join(folder, fmt.Sprintf("folder-%d.json", i)), def, 0o644); err != nil {
			t.Fatal(err)
		}
		var props map[string]any
		_ = json.Unmarshal([]byte(importDef), &props)
		export = append(export, map[string]any{"name": fmt.Sprintf("win/export-%d", i), "properties": props})
	}
	b, _ := json.MarshalIndent(export, "", "  ") // as ConvertTo-Json writes it, then > in PowerShell 5
	exportFile := filepath.Join(dir, "export.json")
	if err := os.WriteFile(exportFile, utf16(t, unicode.LittleEndian, string(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := p.mustRun(t, "", "job", "import", "win", folder, exportFile); !strings.Contains(out, "imported 6 jobs") {
		t.Errorf("import:\n%s", out)
	}
	list := p.mustRun(t, "", "job", "list", "win", "-o", "json")
	if n := strings.Count(list, `"name": "win/`); n != 12 {
		t.Errorf("win holds %d jobs, want 12:\n%s", n, list)
	}
}

// An action's summary counts its retries as English does.
func TestActionTextCountsRetries(t *testing.T) {
	for n, want := range map[int]string{1: "(1 retry 30s later)", 2: "(2 retries 30s apart)", 0: "(no retries)"} {
		a := &job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{Method: "GET", URI: "http://x/"},
			RetryPolicy: &job.RetryPolicy{RetryType: job.RetryFixed, RetryInterval: ptr(job.DurationOf(30 * time.Second)), RetryCount: &n}}
		if n == 0 {
			a.RetryPolicy = &job.RetryPolicy{RetryType: job.RetryNone}
		}
		if got := actionText(a); !strings.HasSuffix(got, want) {
			t.Errorf("%d retries: %q, want it to end %q", n, got, want)
		}
	}
	if got := plural(1, "message") + ", " + plural(2, "byte"); got != "1 message, 2 bytes" {
		t.Errorf("plural: %q", got)
	}
}

func ptr[T any](v T) *T { return &v }
