// Package apitest calls the scheduler's NATS API (docs/nats-api.md) from tests and benchmarks
// that need many jobs: bulk loads through jobs.bulk, as schedctl job import sends them.
package apitest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/testenv"
)

// BulkPut puts n jobs in collection c (which must exist) through jobs.bulk.<c>, 1,000 a
// request, 8 requests at once: job i is named name(i), with the properties JSON props(i). Any
// refused job fails the test.
func BulkPut(tb testing.TB, nc *nats.Conn, c string, n int, name, props func(i int) string) {
	tb.Helper()
	const per, inFlight = 1000, 8
	var next atomic.Int64
	testenv.Parallel(tb, inFlight, func(int) error {
		for first := int(next.Add(per) - per); first < n; first = int(next.Add(per) - per) {
			if err := Bulk(nc, c, BulkBody(first, min(first+per, n), name, props)); err != nil {
				return err
			}
		}
		return nil
	})
}

// BulkBody is the jobs.bulk request for jobs first to end-1, named and with properties as in
// BulkPut.
func BulkBody(first, end int, name, props func(i int) string) string {
	var b strings.Builder
	b.WriteString(`{"jobs": [`)
	for i := first; i < end; i++ {
		if i > first {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name": %q, "properties": %s}`, name(i), props(i))
	}
	b.WriteString(`]}`)
	return b.String()
}

// Bulk sends one jobs.bulk request to collection c and fails on an error answer or a refused job.
func Bulk(nc *nats.Conn, c, body string) error {
	msg, err := nc.Request("scheduler.api.jobs.bulk."+c, []byte(body), time.Minute)
	switch {
	case err != nil:
		return fmt.Errorf("jobs.bulk.%s: %w", c, err)
	case msg.Header.Get("Nats-Service-Error-Code") != "":
		return fmt.Errorf("jobs.bulk.%s: %.300s", c, msg.Data)
	case strings.Contains(string(msg.Data), `"error"`):
		return fmt.Errorf("jobs.bulk.%s refused a job: %.300s", c, msg.Data)
	}
	return nil
}
