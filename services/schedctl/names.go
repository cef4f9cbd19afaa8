package main

import (
	"encoding/json"
	"fmt"
	"io"
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
// `schedctl __complete collection|job WORD` prints, one per line, the collections (for job:
// "name/", to go on with the job) or the jobs "collection/job" whose names start with WORD,
// asked of the planners as the other commands do (NATS_URL and the other variables). It
// prints nothing, and exits 0, when no planner answers: a shell then completes nothing.
func runCompleteNames(args []string, stdin io.Reader, stdout, _ io.Writer) int {
	inv := newInvocation("__complete", "collection|job WORD", stdin, stdout, io.Discard)
	inv.timeout = completeTimeout
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

// collectionNames lists the collections whose names start with prefix, completeMax at most.
// An error (no planner) ends the list where it is: a shell then completes what was read.
func (inv *invocation) collectionNames(prefix string) []string {
	var names []string
	inv.eachName(listRequest{Top: 1000}, func(n string) bool {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
		return len(names) < completeMax
	}, "collections", "list")
	return names
}

// jobNames lists the jobs of a collection whose names start with prefix, from the first of
// them on (the planners keep a collection's jobs in name order), completeMax at most.
func (inv *invocation) jobNames(coll, prefix string) []string {
	var names []string
	inv.eachName(listRequest{Top: 100, After: bus.AfterForPrefix(prefix)}, func(n string) bool {
		_, n, _ = strings.Cut(n, "/") // a job's name is collection/job
		if !strings.HasPrefix(n, prefix) {
			return false // past the prefix
		}
		names = append(names, n)
		return len(names) < completeMax
	}, "jobs", "list", coll)
	return names
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
