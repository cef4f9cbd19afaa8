package api

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/resched/resched/services/planner/internal/jobs"
)

// A page too large for one reply is asked for again with half as many items until it fits,
// and one item too large alone is an error that says so, not a reply NATS would refuse. The
// listings themselves are tested end to end in paging_test.go.
func TestFittedHalvesThePageUntilItFits(t *testing.T) {
	item := strings.Repeat("x", 30) // 32 bytes encoded, and a comma
	var asked []int
	list := func(p jobs.PageRequest) (jobs.Page[string], error) {
		asked = append(asked, p.Top)
		out := jobs.Page[string]{Value: make([]string, p.Top), NextLink: &jobs.PageRequest{Top: p.Top, After: "x"}}
		for i := range out.Value {
			out.Value[i] = item
		}
		return out, nil
	}
	v, _, err := fitted(260, jobs.PageRequest{Top: 20}, list)
	if err != nil {
		t.Fatal(err)
	}
	raw := v.(json.RawMessage)
	var got jobs.Page[string]
	if err := json.Unmarshal(raw, &got); err != nil || len(raw) > 260 || len(got.Value) != 5 || got.NextLink == nil ||
		!slices.Equal(asked, []int{20, 10, 5}) {
		t.Fatalf("reply of %d bytes with %d items (%v), asked %v; want 20, 10, then 5 items, a nextLink, at most 260 bytes",
			len(raw), len(got.Value), err, asked)
	}
	if _, _, err := fitted(20, jobs.PageRequest{Top: 20}, list); !errors.As(err, new(*jobs.Error)) || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("one item over the limit: %v, want an error naming max_payload", err)
	}
}
