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
		names, _ := inv.jobNames(coll, prefix)
		for _, n := range names {
			fmt.Fprintf(stdout, "%s/%s\n", coll, n)
		}
	case kind == "job" || kind == "collection":
		names, _ := inv.collectionNames(coll)
		for _, n := range names {
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

// collectionNames lists the collections whose names start with prefix.
func (inv *invocation) collectionNames(prefix string) ([]string, error) {
	var names []string
	req := listRequest{Top: 1000}
	for len(names) < completeMax {
		page, err := inv.namesPage(req, "collections", "list")
		if err != nil {
			return names, err
		}
		for _, n := range page.names {
			if strings.HasPrefix(n, prefix) && len(names) < completeMax {
				names = append(names, n)
			}
		}
		if page.next == nil {
			break
		}
		req = *page.next
	}
	return names, nil
}

// jobNames lists the jobs of a collection whose names start with prefix, from the first of
// them on: the planners keep a collection's jobs in name order.
func (inv *invocation) jobNames(coll, prefix string) ([]string, error) {
	req := listRequest{Top: 100, After: bus.AfterForPrefix(prefix)}
	var names []string
	for len(names) < completeMax {
		page, err := inv.namesPage(req, "jobs", "list", coll)
		if err != nil {
			return names, err
		}
		for _, n := range page.names {
			_, n, _ = strings.Cut(n, "/") // a job's name is collection/job
			if !strings.HasPrefix(n, prefix) {
				return names, nil // past the prefix
			}
			names = append(names, n)
		}
		if page.next == nil {
			break
		}
		req = *page.next
	}
	return names, nil
}

// namesPage is a listing's page reduced to its items' names.
type namesPage struct {
	names []string
	next  *pageLink
}

func (inv *invocation) namesPage(req listRequest, tokens ...string) (namesPage, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return namesPage{}, err
	}
	msg, err := inv.request(body, tokens...)
	if err != nil {
		return namesPage{}, err
	}
	var page struct {
		Value []struct {
			Name string `json:"name"`
		} `json:"value"`
		NextLink *pageLink `json:"nextLink"`
	}
	if err := json.Unmarshal(msg.Data, &page); err != nil {
		return namesPage{}, fmt.Errorf("decode the planner's reply: %w", err)
	}
	out := namesPage{next: page.NextLink}
	for _, v := range page.Value {
		out.names = append(out.names, v.Name)
	}
	return out, nil
}
