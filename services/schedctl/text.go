package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
	"sigs.k8s.io/yaml"
)

// utf8Reader reads r as the UTF-8 that JSON is: a byte-order mark at the start is dropped, and
// one of UTF-16 (little or big endian) has the text converted. Windows tools write them: a
// definition saved by Notepad or `Set-Content -Encoding UTF8` starts with the UTF-8 mark, and
// PowerShell 5's `>` and `Out-File` write UTF-16LE, as when an Azure Scheduler user saves the
// REST listing of a collection's jobs with `Invoke-RestMethod … | ConvertTo-Json -Depth 20 >
// jobs.json`. Text without a mark passes unchanged. golang.org/x/text's BOMOverride does
// exactly this, streaming, so an export of a million jobs is still read a piece at a time.
func utf8Reader(r io.Reader) io.Reader {
	return transform.NewReader(r, unicode.BOMOverride(transform.Nop))
}

// readText reads the file a -f flag names ("-": standard input) as UTF-8 (utf8Reader), JSON
// or YAML (fromYAML).
func readText(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		b, err := io.ReadAll(utf8Reader(stdin))
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return fromYAML(b), nil
	}
	b, err := readUTF8(name)
	if err != nil {
		return nil, usagef("-f: %v", err) // the error names the file
	}
	return fromYAML(b), nil
}

// fromYAML turns a YAML mapping into the JSON object the planners read, so that what
// `-o yaml` printed, edited, can be put back (`job get J -o yaml > j.yaml`, then `job put J
// -f j.yaml`). The library is the one that printed it, so a value it quoted to stay a string
// (a time, "00:00:30") is read back as one. Text that starts as JSON does ({ or [), or that is
// not a YAML mapping, is left as it is: the planners then name what is wrong with it.
func fromYAML(b []byte) []byte {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] == '{' || trimmed[0] == '[' {
		return b
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil || !bytes.HasPrefix(j, []byte("{")) {
		return b
	}
	return j
}

// readUTF8 reads a file as UTF-8 (utf8Reader).
func readUTF8(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(utf8Reader(f))
}
