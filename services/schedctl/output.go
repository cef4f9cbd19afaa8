package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// show prints a reply: with -o json or yaml as the planner sent it, else through table, which
// gets the reply decoded.
func show[T any](inv *invocation, data []byte, table func(w io.Writer, v T)) error {
	if inv.structured() {
		return inv.print(data)
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("decode the planner's reply: %w", err)
	}
	tw := newTable(inv.stdout)
	table(tw, v)
	return tw.Flush()
}

// print writes JSON data as -o asks: indented JSON, or YAML.
func (inv *invocation) print(data []byte) error {
	if inv.output == "yaml" {
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return fmt.Errorf("the planner's reply is not JSON: %w", err)
		}
		_, err = inv.stdout.Write(y)
		return err
	}
	return printJSON(inv.stdout, data)
}

// printJSON writes JSON indented, with a final newline.
func printJSON(w io.Writer, data []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return fmt.Errorf("the planner's reply is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// row writes one line of a table; tabs and line breaks inside a cell would break the columns.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = oneLine(c)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// field writes one line of a key: value summary; without a key, a further value of the one
// above (a second outage), under its value.
func field(w io.Writer, key, value string) {
	if key != "" {
		key += ":"
	}
	row(w, key, value)
}

func oneLine(s string) string {
	if strings.ContainsAny(s, "\t\r\n") {
		s = strings.Join(strings.Fields(s), " ")
	}
	return printable(s)
}

// printable shows the control characters of s as escapes (\x1b), and the characters that
// reorder text (U+202E) too. What schedctl prints comes partly from targets: a history
// message holds the target's reason phrase, headers and body, and an ESC there would have
// been read by the operator's terminal as a command (clear the screen, set the title, hide
// the text that follows).
func printable(s string) string {
	if !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unprintable(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// unprintable is a control character other than the tab (C0, DEL, C1) or a bidirectional
// embedding, override or isolate.
func unprintable(r rune) bool {
	return (r < 0x20 && r != '\t') || (r >= 0x7f && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// truncate shortens s to at most n characters, marking the cut.
func truncate(s string, n int) string {
	r := []rune(oneLine(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}

// timeText formats an instant as RFC 3339 UTC to the millisecond (a run-now and the scheduled
// run of the same second are told apart), "-" when absent.
func timeText(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// countText formats a quota, "-" when unset.
func countText(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
