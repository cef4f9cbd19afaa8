// Command schedctl is the resched command-line tool: `schedctl <command> [flags]`.
//
// Commands run through the commands table so each lives in its own file with the signature
// of command; `schedctl help` lists them. Exit status: 0 success, 1 failure, 2 bad usage.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/resched/resched/services/internal/version"
)

// command runs one subcommand with the arguments after its name and returns the exit status.
type command = func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// commands is the read-only table of subcommands. It is filled by init: completion walks the
// table, so the table cannot refer to it in its own initialiser.
var commands map[string]command

func init() {
	commands = map[string]command{
		"version":    runVersion,
		"completion": runCompletion,
		"preview":    previewCommand(time.Now),
	}
	for _, g := range groups {
		commands[g.name] = g.command()
	}
}

// groups are the commands made of subcommands; completion walks them too.
var groups = []*group{collectionGroup, jobGroup, clusterGroup}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a command and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	args = hoistGlobalFlags(args) // "schedctl -o json job get c/j" as well as after the command
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "--version", "-version":
		return runVersion(rest, stdin, stdout, stderr)
	case "__complete": // the completion scripts' question, not a command for people
		return runCompleteNames(rest, stdin, stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "schedctl: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	return cmd(rest, stdin, stdout, stderr)
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands)+1)
	for name := range commands {
		names = append(names, name)
	}
	names = append(names, "help")
	slices.Sort(names)
	fmt.Fprintf(w, "usage: schedctl <command> [flags]\n\ncommands:\n  %s\n\n", strings.Join(names, "\n  "))
	fmt.Fprintln(w, "collection, job and cluster talk to the planner's NATS API (--server or NATS_URL,")
	fmt.Fprintln(w, "default nats://127.0.0.1:4222); -o json prints the planner's JSON reply.")
	fmt.Fprintln(w, "preview runs locally, without a planner. --version prints the version;")
	fmt.Fprintln(w, "completion bash|zsh|fish prints a shell completion script.")
	fmt.Fprintln(w, "Exit status: 0 success, 1 failure, 2 bad usage or input the planner rejected.")
	fmt.Fprintln(w, "Run 'schedctl <command> -h' for a command's flags.")
}

// runVersion prints the schedctl version and the Go toolchain that built it.
func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: schedctl version")
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			return 0
		}
		return 2
	}
	fmt.Fprintf(stdout, "schedctl %s %s %s/%s\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
