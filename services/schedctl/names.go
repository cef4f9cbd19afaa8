package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/resched/resched/services/internal/bus"
)

// completeTimeout bounds the planner's answer to a completion: a shell waits on it at each
// Tab, and an unreachable server must cost a second, not the usual five.
const completeTimeout = time.Second

// completeMax is the most names a completion lists.
const completeMax = 200

// runCompleteNames serves the completion scripts (not a command for people, so not listed):
// `schedctl __complete collection|job WORD [-- LINE]` prints, one per line, the collections
// (for job: "name/", to go on with the job) or the jobs "collection/job" whose names start
// with WORD, asked of the planners as the other commands do (NATS_URL and the other
// variables, and the connection flags written on LINE). LINE is the command line before WORD:
// when WORD is not the subcommand's first argument there (a second argument, a flag's value),
// it exits 1 and the shell completes file names. It prints nothing, and exits 0, when no
// planner answers: a shell then completes nothing.
func runCompleteNames(args []string, stdin io.Reader, stdout, _ io.Writer) int {
	inv := newInvocation("__complete", "collection|job WORD", stdin, stdout, io.Discard)
	inv.timeout = completeTimeout
	if i := slices.Index(args, "--"); i >= 0 {
		at, conn := nameAt(lineWords(args[i+1:]))
		if !at {
			return 1
		}
		args = append(args[:i:i], conn...)
	}
	pos, err := inv.parse(args, 2, 2)
	if err != nil {
		return 2
	}
	defer inv.close()
	kind, word := pos[0], pos[1]
	coll, prefix, isJob := strings.Cut(word, "/")
	switch {
	case kind == "job" && isJob:
		for _, n := range inv.jobNames(coll, prefix) {
			fmt.Fprintf(stdout, "%s/%s\n", coll, n)
		}
	case kind == "job" || kind == "collection":
		for _, n := range inv.collectionNames(coll) {
			if kind == "job" {
				n += "/"
			}
			fmt.Fprintln(stdout, n)
		}
	default:
		return 2
	}
	return 0
}

// completePages bounds the pages a completion reads: a Tab walks no whole listing, and a
// nextLink that does not move cannot hold it.
const completePages = 10

// collectionNames lists the collections whose names start with prefix, from the first of them
// on (the planners list collections in name order), completeMax at most. Read from the first
// collection, a prefix past the first 10 pages completed nothing. An error (no planner) ends
// the list where it is: a shell then completes what was read.
func (inv *invocation) collectionNames(prefix string) []string {
	var names []string
	inv.eachName(listRequest{Top: 1000, After: bus.AfterForPrefix(prefix)}, func(n string) bool {
		return withPrefix(&names, n, prefix)
	}, "collections", "list")
	return names
}

// jobNames lists the jobs of a collection whose names start with prefix, from the first of
// them on (the planners keep a collection's jobs in name order), completeMax at most.
func (inv *invocation) jobNames(coll, prefix string) []string {
	var names []string
	inv.eachName(listRequest{Top: 100, After: bus.AfterForPrefix(prefix)}, func(n string) bool {
		_, n, _ = strings.Cut(n, "/") // a job's name is collection/job
		return withPrefix(&names, n, prefix)
	}, "jobs", "list", coll)
	return names
}

// withPrefix takes the next name of a listing in name order into names when it starts with
// prefix; it answers whether to read on: not past the prefix, nor past completeMax. A name
// before the prefix is passed over (a planner of an earlier release ignores the cursor).
func withPrefix(names *[]string, n, prefix string) bool {
	switch {
	case strings.HasPrefix(n, prefix):
		*names = append(*names, n)
		return len(*names) < completeMax
	default:
		return n < prefix
	}
}

// eachName reads a listing page by page from req, completePages at most, and gives take each
// item's name until it answers false.
func (inv *invocation) eachName(req listRequest, take func(name string) bool, tokens ...string) {
	p := &paging{top: req.Top, after: req.After}
	for range completePages {
		_, page, err := inv.list(p, listRequest{}, tokens...)
		if err != nil {
			return
		}
		for _, raw := range page.Value {
			var item struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(raw, &item) != nil || !take(item.Name) {
				return
			}
		}
		if page.NextLink == nil {
			return
		}
		p = &paging{top: page.NextLink.Top, skip: page.NextLink.Skip, after: page.NextLink.After}
	}
}

// lineWords splits the command line the shell passes (bash and zsh: one string; fish: its
// tokens) into words as a shell would for plain words: quotes around a word removed, a
// leading ~/ made the home folder. Nothing is run or expanded otherwise.
func lineWords(line []string) []string {
	words := strings.Fields(strings.Join(line, " "))
	home, _ := os.UserHomeDir()
	for i, w := range words {
		if len(w) >= 2 && (w[0] == '"' || w[0] == '\'') && w[len(w)-1] == w[0] {
			w = w[1 : len(w)-1]
		}
		if rest, ok := strings.CutPrefix(w, "~/"); ok && home != "" {
			w = filepath.Join(home, rest)
		}
		words[i] = w
	}
	return words
}

// nameAt reads a command line ("schedctl job get --server URL", the word being completed left
// out) as its subcommand would: whether the next word is the subcommand's first argument,
// and the connection flags written on it (not -o or --timeout), with their values, so that
// the names come from the planners the command will ask.
func nameAt(words []string) (bool, []string) {
	if len(words) < 3 {
		return false, nil
	}
	words = hoistGlobalFlags(words[1:]) // "schedctl --server URL job get" as the command reads it
	fs := subcommandFlags(words[0], words[1])
	if fs == nil {
		return false, nil
	}
	connection := newInvocation("", "", nil, io.Discard, io.Discard).fs
	var conn []string
	args := 0
	for i := 2; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			args += len(words) - i - 1
			break
		}
		name, inline := flagName(w)
		if name == "" {
			args++
			continue
		}
		f := fs.Lookup(name)
		n := 1 // the words this flag takes
		if f != nil && !inline && !isBoolFlag(f) {
			if i+1 == len(words) {
				return false, nil // the word being completed is this flag's value
			}
			n = 2
		}
		if connection.Lookup(name) != nil && name != "o" && name != "output" && name != "timeout" {
			conn = append(conn, words[i:i+n]...)
		}
		i += n - 1
	}
	return args == 0, conn
}

// subcommandFlags is the flag set of a group's subcommand ("job", "get"), nil when there is
// none: the subcommand is run with -h against a discarded output, which defines its flags and
// stops.
func subcommandFlags(group, sub string) *flag.FlagSet {
	for _, g := range groups {
		for _, s := range g.subs {
			if g.name == group && s.name == sub {
				inv := newInvocation(g.name+" "+s.name, s.args, strings.NewReader(""), io.Discard, io.Discard)
				_ = s.run(inv, []string{"-h"})
				return inv.fs
			}
		}
	}
	return nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
