package main

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// Listings across collections are asked several at once and answered in the collections'
// order: fetch waits until listsInFlight calls are under way together, which never happens one
// after the other (the test then fails at its deadline rather than hanging).
func TestInOrderAsksSeveralAtOnceAndKeepsTheOrder(t *testing.T) {
	const n = 50
	var together sync.WaitGroup
	together.Add(listsInFlight)
	all := make(chan struct{})
	go func() { together.Wait(); close(all) }()
	got, err := inOrder(n, listsInFlight, func(i int) (string, error) {
		if i < listsInFlight {
			together.Done()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				return "", fmt.Errorf("call %d: the first %d calls were never under way together", i, listsInFlight)
			}
		}
		return fmt.Sprint(i), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// The first error, by index, is answered, and no call starts after one failed.
func TestInOrderStopsAtAnError(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	_, err := inOrder(1000, 1, func(i int) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if i == 3 {
			return 0, errors.New("three")
		}
		return i, nil
	})
	if err == nil || err.Error() != "three" || calls != 4 {
		t.Fatalf("err %v after %d calls, want three after 4", err, calls)
	}
	if got, err := inOrder(0, listsInFlight, func(int) (int, error) { return 0, errors.New("called") }); err != nil || len(got) != 0 {
		t.Fatalf("no calls: %v %v", got, err)
	}
}
