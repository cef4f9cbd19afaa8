package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natsconn"
)

// Exit statuses of the API commands. A request the planner refused as invalid (status 400)
// counts as bad usage, because the fix is in the command line or the file it names.
const (
	exitOK      = 0
	exitFailure = 1 // not found, conflict, the planner failed, NATS or no planner unreachable
	exitUsage   = 2 // bad flags or arguments, or input the planner rejected as invalid
)

// globalFlags are accepted by every API subcommand, before or after the subcommand's name.
// Each takes a value.
var globalFlags = []string{"o", "output", "server", "prefix", "timeout", "user", "password", "creds", "nkey",
	"tlsca", "tlscert", "tlskey", "inbox-prefix"}

// group is a command whose first argument names a subcommand, such as `schedctl job get`.
type group struct {
	name    string
	summary string
	subs    []subcommand
}

// subcommand is one operation of a group. run gets the arguments without the subcommand's
// name, with the global flags where the user put them.
type subcommand struct {
	name    string
	args    string // the synopsis after the name, for usage
	summary string
	run     func(inv *invocation, args []string) error
}

// command returns the group as an entry of the commands table.
func (g *group) command() command {
	return func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		n := leadingGlobalFlags(args)
		if n == len(args) {
			g.usage(stderr)
			return exitUsage
		}
		name := args[n]
		switch name {
		case "help", "-h", "-help", "--help":
			g.usage(stdout)
			return exitOK
		}
		i := slices.IndexFunc(g.subs, func(s subcommand) bool { return s.name == name })
		if i < 0 {
			fmt.Fprintf(stderr, "schedctl %s: unknown subcommand %q\n\n", g.name, name)
			g.usage(stderr)
			return exitUsage
		}
		sub := g.subs[i]
		inv := newInvocation(g.name+" "+sub.name, sub.args, stdin, stdout, stderr)
		defer inv.close()
		rest := append(slices.Clone(args[:n]), args[n+1:]...)
		return inv.exit(sub.run(inv, rest))
	}
}

func (g *group) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: schedctl %s <subcommand> [flags]\n\n%s\n\nsubcommands:\n", g.name, g.summary)
	for _, s := range g.subs {
		fmt.Fprintf(w, "  %s %s\n      %s\n", s.name, s.args, s.summary)
	}
	fmt.Fprint(w, globalUsage)
}

// globalUsage documents the flags every API subcommand takes.
const globalUsage = `
flags of every subcommand (before or after it):
  -o table|json     output: tables (the default) or the planner's JSON reply
  --server URL      NATS server (default $NATS_URL, else nats://127.0.0.1:4222)
  --prefix P        subject prefix (default $RESCHED_SUBJECT_PREFIX, else scheduler)
  --timeout D       how long to wait for the planner (default 5s)

exit status: 0 success; 1 failure (not found, conflict, planner error, no planner answered);
2 bad usage, or input the planner rejected as invalid (each bad field named by its JSON path).
`

// leadingGlobalFlags counts the arguments at the start of args that are global flags and
// their values, so that `schedctl job -o json get` finds the subcommand "get".
func leadingGlobalFlags(args []string) int {
	i := 0
	for i < len(args) {
		name, hasValue := flagName(args[i])
		if name == "" || !slices.Contains(globalFlags, name) {
			break
		}
		i++
		if !hasValue {
			i++ // the value is the next argument
		}
	}
	return min(i, len(args))
}

// flagName returns the name of a flag argument ("-o", "--server=x") and whether its value is
// in the same argument; "" when arg is not a flag.
func flagName(arg string) (string, bool) {
	if len(arg) < 2 || arg[0] != '-' || arg == "--" {
		return "", false
	}
	name := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
	if k, _, ok := strings.Cut(name, "="); ok {
		return k, true
	}
	return name, false
}

// hoistGlobalFlags moves global flags written before the command name after it:
// `schedctl -o json job get c/j` becomes `schedctl job -o json get c/j`, which the group
// parses. It leaves anything else as it is.
func hoistGlobalFlags(args []string) []string {
	n := leadingGlobalFlags(args)
	if n == 0 || n == len(args) {
		return args
	}
	out := append([]string{args[n]}, args[:n]...)
	return append(out, args[n+1:]...)
}

// invocation is one run of a subcommand: its streams, its flags and, once a request is made,
// the NATS connection.
type invocation struct {
	name   string // "job get", for messages
	args   string // the synopsis, for usage
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	fs     *flag.FlagSet

	output, server, prefix string
	timeout                time.Duration
	nats                   natsconn.Options // server and credentials; Options.URL is server

	connMu sync.Mutex // job import's senders connect at once
	client *client
}

func newInvocation(name, args string, stdin io.Reader, stdout, stderr io.Writer) *invocation {
	inv := &invocation{name: name, args: args, stdin: stdin, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("schedctl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&inv.output, "o", "table", "output `format`: table, json or yaml")
	fs.StringVar(&inv.output, "output", "table", "output `format`: table, json or yaml")
	// No defaults from the environment here: -h prints defaults, and NATS_URL may hold a password.
	fs.StringVar(&inv.server, "server", "", "NATS server `URL` (default $"+envServer+", else "+defaultServer+")")
	fs.StringVar(&inv.prefix, "prefix", "", "subject `prefix` (default $"+envPrefix+", else "+bus.DefaultPrefix+")")
	// The nats CLI's names; each defaults to the variable the NATS tooling reads.
	fs.StringVar(&inv.nats.User, "user", "", "NATS user `name` (default $NATS_USER)")
	fs.StringVar(&inv.nats.Password, "password", "", "NATS `password` (default $NATS_PASSWORD)")
	fs.StringVar(&inv.nats.Creds, "creds", "", "NATS .creds `file` (default $NATS_CREDS)")
	fs.StringVar(&inv.nats.NKey, "nkey", "", "NATS nkey seed `file` (default $NATS_NKEY)")
	fs.StringVar(&inv.nats.CA, "tlsca", "", "PEM `file` of the CAs of the NATS servers (default $NATS_CA)")
	fs.StringVar(&inv.nats.Cert, "tlscert", "", "PEM `file` of a client certificate (default $NATS_CERT)")
	fs.StringVar(&inv.nats.Key, "tlskey", "", "PEM `file` of the client certificate's key (default $NATS_KEY)")
	fs.StringVar(&inv.nats.InboxPrefix, "inbox-prefix", "", "reply subjects' `prefix`, as a user's permissions allow (default $NATS_INBOX_PREFIX, else _INBOX)")
	fs.DurationVar(&inv.timeout, "timeout", defaultTimeout, "how long to wait for the planner")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: schedctl %s %s\n", name, args)
		fs.PrintDefaults()
	}
	inv.fs = fs
	return inv
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// errFlags reports a flag the flag package has already complained about.
var errFlags = errors.New("bad flags")

// parse reads the flags, which may come before, between or after the positional arguments,
// and returns the positional arguments, of which there must be from least to most.
func (inv *invocation) parse(args []string, least, most int) ([]string, error) {
	var pos []string
	for {
		if err := inv.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errFlags
		}
		rest := inv.fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // after --, everything is an argument
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < least || len(pos) > most {
		return nil, usagef("expected %s", inv.args)
	}
	if inv.output != "table" && inv.output != "json" && inv.output != "yaml" {
		return nil, usagef("-o %q: must be table, json or yaml", inv.output)
	}
	if inv.timeout <= 0 {
		return nil, usagef("--timeout %s: must be more than 0", inv.timeout)
	}
	inv.server = firstOf(inv.server, os.Getenv(envServer), defaultServer)
	for _, o := range []struct {
		v   *string
		env string
	}{{&inv.nats.User, "NATS_USER"}, {&inv.nats.Password, "NATS_PASSWORD"}, {&inv.nats.Token, "NATS_TOKEN"},
		{&inv.nats.Creds, "NATS_CREDS"}, {&inv.nats.NKey, "NATS_NKEY"}, {&inv.nats.CA, "NATS_CA"},
		{&inv.nats.Cert, "NATS_CERT"}, {&inv.nats.Key, "NATS_KEY"}, {&inv.nats.InboxPrefix, "NATS_INBOX_PREFIX"}} {
		*o.v = firstOf(*o.v, os.Getenv(o.env))
	}
	inv.nats.URL = inv.server
	if err := errors.Join(inv.nats.Check()...); err != nil {
		return nil, &usageError{strings.ReplaceAll(strings.ReplaceAll(err.Error(), "(-nats-", "(--"), "\n", "; ")}
	}
	inv.prefix = firstOf(inv.prefix, os.Getenv(envPrefix), bus.DefaultPrefix)
	if err := checkPrefix(inv.prefix); err != nil {
		return nil, &usageError{err.Error()}
	}
	return pos, nil
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// request sends body to <prefix>.api.<tokens>, connecting on the first call.
func (inv *invocation) request(body []byte, tokens ...string) (*nats.Msg, error) {
	return inv.requestMsg(body, nil, tokens...)
}

// requestMsg is request with headers.
func (inv *invocation) requestMsg(body []byte, headers map[string]string, tokens ...string) (*nats.Msg, error) {
	if err := inv.connect(); err != nil {
		return nil, err
	}
	return inv.client.request(body, headers, tokens...)
}

// given reports whether the command line set the flag name.
func (inv *invocation) given(name string) bool {
	set := false
	inv.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// waitLonger makes the wait for the planner's answers d when --timeout was not given (the
// connection's own wait stays --timeout's).
func (inv *invocation) waitLonger(d time.Duration) error {
	if inv.given("timeout") {
		return nil
	}
	if err := inv.connect(); err != nil {
		return err
	}
	inv.client.timeout = max(inv.client.timeout, d)
	return nil
}

// connect dials NATS once, at the first command that needs it.
func (inv *invocation) connect() error {
	inv.connMu.Lock()
	defer inv.connMu.Unlock()
	if inv.client != nil {
		return nil
	}
	c, err := dial(inv.nats, inv.prefix, inv.timeout)
	if err != nil {
		return err
	}
	inv.client = c
	return nil
}

func (inv *invocation) close() {
	if inv.client != nil {
		inv.client.close()
	}
}

// structured reports whether -o json or -o yaml was asked for: the planner's reply is then
// printed as it is, in that form.
func (inv *invocation) structured() bool { return inv.output != "table" }

// errDeclined says the user did not confirm.
var errDeclined = errors.New("not confirmed: nothing done")

// confirm asks a yes/no question on standard error and reads the answer from standard input;
// yes (--yes) answers it at once. No answer (no input) is a no.
func (inv *invocation) confirm(yes bool, question string) error {
	if yes {
		return nil
	}
	fmt.Fprintf(inv.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(inv.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	case "":
		if line == "" { // end of input: nobody there to answer
			fmt.Fprintln(inv.stderr)
			return errors.New("no answer (standard input is empty): add --yes to confirm without a question")
		}
	}
	return errDeclined
}

// yesFlag is the --yes of a command that asks before it destroys something.
func yesFlag(fs *flag.FlagSet) *bool {
	y := fs.Bool("yes", false, "do not ask for confirmation")
	fs.BoolVar(y, "y", false, "short for --yes")
	return y
}

// exit prints err and returns the exit status.
func (inv *invocation) exit(err error) int {
	var usage *usageError
	var api *apiError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFlags):
		return exitUsage
	case errors.As(err, &usage):
		fmt.Fprintf(inv.stderr, "schedctl %s: %s\nusage: schedctl %s %s\n", inv.name, usage.msg, inv.name, inv.args)
		return exitUsage
	case errors.As(err, new(*importRefused)):
		fmt.Fprintf(inv.stderr, "schedctl: %v\n", err)
		return exitUsage
	case errors.As(err, &api):
		fmt.Fprintf(inv.stderr, "schedctl: %s\n", printable(api.Message))
		if len(api.Details) == 1 && strings.HasSuffix(api.Message, api.Details[0].Message) {
			api.Details = nil // the message says it already ("the request is invalid: top: …")
		}
		for _, d := range api.Details {
			if d.Path == "" {
				fmt.Fprintf(inv.stderr, "  %s\n", printable(d.Message))
			} else {
				fmt.Fprintf(inv.stderr, "  %s: %s\n", printable(d.Path), printable(d.Message))
			}
		}
		if api.Status == 400 {
			return exitUsage
		}
		return exitFailure
	default:
		fmt.Fprintf(inv.stderr, "schedctl: %v\n", err)
		return exitFailure
	}
}

// readFile reads the file a -f flag names; "-" is standard input.
func (inv *invocation) readFile(name string) ([]byte, error) { return readText(name, inv.stdin) }
