package main

import (
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantStdout string // substring; "" means stdout must be empty
		wantStderr string // substring; "" means stderr must be empty
	}{
		{"no command", nil, 2, "", "usage: schedctl <command>"},
		{"help", []string{"help"}, 0, "usage: schedctl <command>", ""},
		{"-h", []string{"-h"}, 0, "usage: schedctl <command>", ""},
		{"--help", []string{"--help"}, 0, "version", ""},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"unknown command lists commands", []string{"frobnicate"}, 2, "", "  version"},
		{"flag as command", []string{"-n", "5"}, 2, "", `unknown command "-n"`},
		{"version", []string{"version"}, 0, "schedctl ", ""},
		{"version shows Go", []string{"version"}, 0, runtime.Version(), ""},
		{"version extra argument", []string{"version", "x"}, 2, "", "usage: schedctl version"},
		{"version help", []string{"version", "-h"}, 0, "", "usage: schedctl version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			got := run(tt.args, strings.NewReader(""), &stdout, &stderr)
			if got != tt.wantStatus {
				t.Errorf("run(%q) = %d, want %d", tt.args, got, tt.wantStatus)
			}
			check(t, "stdout", stdout.String(), tt.wantStdout)
			check(t, "stderr", stderr.String(), tt.wantStderr)
		})
	}
}

func check(t *testing.T, stream, got, want string) {
	t.Helper()
	if want == "" && got != "" {
		t.Errorf("%s = %q, want nothing", stream, got)
	}
	if !strings.Contains(got, want) {
		t.Errorf("%s = %q, want it to contain %q", stream, got, want)
	}
}

// TestRunPassesArguments checks a command gets the arguments after its name and the streams.
func TestRunPassesArguments(t *testing.T) {
	var gotArgs []string
	var gotInput string
	commands["test-echo"] = func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		gotArgs = args
		b, _ := io.ReadAll(stdin)
		gotInput = string(b)
		io.WriteString(stdout, "out")
		io.WriteString(stderr, "err")
		return 7
	}
	defer delete(commands, "test-echo")

	var stdout, stderr strings.Builder
	status := run([]string{"test-echo", "-f", "-", "-n", "5"}, strings.NewReader("job"), &stdout, &stderr)
	if status != 7 || stdout.String() != "out" || stderr.String() != "err" {
		t.Errorf("run = %d, stdout %q, stderr %q; want the command's 7, out, err", status, stdout.String(), stderr.String())
	}
	if strings.Join(gotArgs, " ") != "-f - -n 5" || gotInput != "job" {
		t.Errorf("command got args %q and stdin %q", gotArgs, gotInput)
	}
}
