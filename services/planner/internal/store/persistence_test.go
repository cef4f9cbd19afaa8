package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
)

// A Redis without an append-only file is named: a restart of it loses the jobs written since
// its last snapshot. One with AOF, as operations.md and make run set it, is not; on a Cluster
// each master is asked.
func TestUnloggedNamesAServerWithoutAOF(t *testing.T) {
	ctx := context.Background()
	if got, err := store.New(redistest.Start(t).Client(t), "").Unlogged(ctx); err != nil || !slices.Equal(got, []string{"redis"}) {
		t.Errorf("without AOF: %q, %v", got, err)
	}
	if got, err := store.New(redistest.Start(t, redistest.WithPersistence()).Client(t), "").Unlogged(ctx); err != nil || len(got) != 0 {
		t.Errorf("with AOF: %q, %v", got, err)
	}
	c := redistest.StartCluster(t, 3, 0) // with AOF
	s := store.New(c.Client(t), "")
	if got, err := s.Unlogged(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a Cluster with AOF: %q, %v", got, err)
	}
	m := c.MasterOf("resched:{p05}:due")
	if err := m.Client(t).ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Unlogged(ctx); err != nil || !slices.Equal(got, []string{m.Addr}) {
		t.Errorf("one master without AOF: %q, %v; want %s", got, err, m.Addr)
	}
}
