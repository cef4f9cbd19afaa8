package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// Outgrowing one Redis (docs/scaling.md): the data of planners on one server, copied into a
// Redis Cluster with Redis's own `redis-cli --cluster import` and moved to more partitions
// (planner -repartition), is their data on the Cluster. A job keeps its definition, status and
// history, and its next occurrences fire on the schedule it had, numbered on from those
// before: the planner's keys carry their partition's hash tag, so each lands whole on one
// master.
func TestDataMovesFromOneRedisToACluster(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	single := redistest.Start(t)
	base, _, stop := started(t, testConfig(ns.ClientURL(), single.URL()))
	waitReady(t, base)
	request(t, nc, "scheduler.api.collections.put.c", `{"properties":{}}`)
	start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	request(t, nc, "scheduler.api.jobs.put.c.j", fmt.Sprintf(`{"startTime":%q,"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}},
		"recurrence":{"frequency":"Second","interval":1}}`, start.Format(time.RFC3339)))
	first := fetchDue(t, nc, 1)[0]
	recordResult(t, nc, first)
	var before job.Definition
	testenv.Eventually(t, 20*time.Second, "the result applied", func() bool {
		before = getJob(t, nc)
		return before.Properties.Status != nil && before.Properties.Status.ExecutionCount == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	cluster := redistest.StartCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "import", cluster.Nodes[0].Addr,
		"--cluster-from", single.Addr, "--cluster-copy").CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster import: %v\n%s", err, out)
	}
	// 16 partitions spread 3 masters 7, 5 and 4: moved to 64 (planner -repartition), as
	// docs/scaling.md says, they spread 22, 21 and 21.
	var out bytes.Buffer
	repartition := []string{"-repartition", "-partitions", "64", "-redis-url", cluster.URL(), "-nats-url", ns.ClientURL()}
	if code := run(repartition, func(string) string { return "" }, &out, &out); code != 0 {
		t.Fatalf("planner -repartition: exit %d\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), `"from":16,"to":64,"collections":1`) {
		t.Errorf("planner -repartition logged:\n%s", out.String())
	}
	if err := serve(context.Background(), testConfig(ns.ClientURL(), cluster.URL()), slog.New(slog.DiscardHandler)); !errors.Is(err, store.ErrLayout) {
		t.Fatalf("a planner at the old 16 partitions after the move: %v, want ErrLayout", err)
	}
	moved := time.Now()
	cfg := testConfig(ns.ClientURL(), cluster.URL())
	cfg.Partitions = 64
	base, _, stop = started(t, cfg)
	defer func() { _ = stop() }()
	waitReady(t, base)
	after := getJob(t, nc)
	was, is := before.Properties, after.Properties
	was.Status, is.Status = nil, nil
	if a, b := mustJSON(t, was), mustJSON(t, is); a != b || after.Properties.Status == nil || after.Properties.Status.ExecutionCount != 1 {
		t.Fatalf("on the cluster the job is %s (status %+v), before %s", b, after.Properties.Status, a)
	}
	var page struct{ Value []job.HistoryEntry }
	if err := json.Unmarshal(request(t, nc, "scheduler.api.jobs.history.c.j", ""), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Value) != 1 || page.Value[0].Status != job.ExecutionCompleted {
		t.Fatalf("history on the cluster %+v, want the one Completed entry", page.Value)
	}
	// The stream holds what the first planner published before its stop, then what the one on
	// the Cluster did: its numbers go on from the first's (an occurrence skipped while no planner
	// ran is not numbered: docs/nats-api.md).
	last := first.Occurrence
	for {
		d := fetchDue(t, nc, 1)[0]
		if d.Scheduled.Before(moved) {
			last = max(last, d.Occurrence)
			continue
		}
		if d.Occurrence != last+1 {
			t.Errorf("occurrence of %v numbered %d after %d: the schedule started again", d.Scheduled, d.Occurrence, last)
		}
		break
	}
}

func getJob(t *testing.T, nc *nats.Conn) job.Definition {
	t.Helper()
	var d job.Definition
	if err := json.Unmarshal(request(t, nc, "scheduler.api.jobs.get.c.j", ""), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
