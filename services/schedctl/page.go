package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
)

// listRequest is the body of a list or history request. A listing's nextLink is the next
// request, sent back as it is.
type listRequest struct {
	Top    int    `json:"top,omitempty"`
	Skip   int    `json:"skip,omitempty"`
	After  string `json:"after,omitempty"`  // a cursor: continue after this item
	State  string `json:"state,omitempty"`  // jobs.list
	Status string `json:"status,omitempty"` // jobs.history
}

// pageLink is a listing's nextLink.
type pageLink = listRequest

// listReply is a listing's answer.
type listReply struct {
	Value    []json.RawMessage `json:"value"`
	NextLink *pageLink         `json:"nextLink,omitempty"`
	Count    *int              `json:"count,omitempty"` // how many in all (collections)
}

// paging holds the paging flags of a list subcommand.
type paging struct {
	top, skip int
	after     string
	all       bool
}

func pagingFlags(fs *flag.FlagSet) *paging {
	p := &paging{}
	fs.IntVar(&p.top, "top", 0, "at most `N` per page (default: the planner's, 100)")
	fs.IntVar(&p.skip, "skip", 0, "pass over the first `N`")
	fs.StringVar(&p.after, "after", "", "continue after this `cursor` (what the previous page said to add)")
	fs.BoolVar(&p.all, "all", false, "follow nextLink to the end of the listing")
	return p
}

func (p *paging) check() error {
	if p.top < 0 || p.skip < 0 {
		return usagef("--top and --skip must be 0 or more")
	}
	return nil
}

// list asks for a listing; with --all it follows nextLink to the end and answers the values
// of every page as one listing without a nextLink.
func (inv *invocation) list(p *paging, req listRequest, tokens ...string) (raw []byte, reply listReply, err error) {
	req.Top, req.Skip, req.After = p.top, p.skip, p.after
	for {
		body, err := json.Marshal(req)
		if err != nil {
			return nil, listReply{}, fmt.Errorf("encode the request: %w", err)
		}
		msg, err := inv.request(body, tokens...)
		if err != nil {
			return nil, listReply{}, err
		}
		var page listReply
		if err := json.Unmarshal(msg.Data, &page); err != nil {
			return nil, listReply{}, fmt.Errorf("decode the planner's reply: %w", err)
		}
		reply.Value = append(reply.Value, page.Value...)
		reply.NextLink, reply.Count = page.NextLink, page.Count
		if !p.all {
			return msg.Data, reply, nil
		}
		if page.NextLink == nil {
			break
		}
		if *page.NextLink == req {
			return nil, listReply{}, fmt.Errorf("the planner's nextLink does not move past this page")
		}
		req = *page.NextLink
	}
	if reply.Value == nil {
		reply.Value = []json.RawMessage{}
	}
	raw, err = json.Marshal(reply)
	return raw, reply, err
}

// showList prints a listing: as JSON, or as a table of one row per value under header,
// with a hint on stderr when more pages follow.
func showList[T any](inv *invocation, raw []byte, reply listReply, none string, header []string, cells func(T) []string) error {
	if inv.structured() {
		return inv.print(raw)
	}
	if len(reply.Value) == 0 && reply.NextLink == nil {
		// As kubectl does: a sentence on standard error rather than a bare header, which reads
		// as a list that failed to load.
		fmt.Fprintln(inv.stderr, none)
		return nil
	}
	if len(reply.Value) == 0 {
		// A filter over a large collection: the planner reads a bounded part a request.
		fmt.Fprintf(inv.stderr, "None in the part read %s\n", moreHint(reply.NextLink, nil))
		return nil
	}
	tw := newTable(inv.stdout)
	row(tw, header...)
	for _, r := range reply.Value {
		var v T
		if err := json.Unmarshal(r, &v); err != nil {
			return fmt.Errorf("decode the planner's reply: %w", err)
		}
		row(tw, cells(v)...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if reply.NextLink != nil {
		fmt.Fprintln(inv.stderr, moreHint(reply.NextLink, reply.Count))
	}
	return nil
}

// moreHint says how to ask for the page after one whose nextLink is n, after how many there
// are in all when count says so.
func moreHint(n *pageLink, count *int) string {
	how := fmt.Sprintf("--skip %d", n.Skip)
	switch {
	case n.After != "" && n.Skip > 0:
		how = fmt.Sprintf("--after %s --skip %d", n.After, n.Skip)
	case n.After != "":
		how = "--after " + n.After
	}
	if count != nil {
		return fmt.Sprintf("(%d in all; more: add %s, or --all)", *count, how)
	}
	return fmt.Sprintf("(more: add %s, or --all)", how)
}

// listsInFlight bounds the listings asked at once across collections.
const listsInFlight = 8

// inOrder calls fetch for 0 to n-1, up to inFlight at once, and answers the results in that
// order. After an error no more are started, and the error of the lowest index is answered.
func inOrder[T any](n, inFlight int, fetch func(int) (T, error)) ([]T, error) {
	out, errs := make([]T, n), make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(inFlight, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && !failed.Load(); i = int(next.Add(1)) - 1 {
				if out[i], errs[i] = fetch(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
