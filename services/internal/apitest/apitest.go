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
		var b strings.Builder
		for first := next.Add(per) - per; first < int64(n); first = next.Add(per) - per {
			b.Reset()
			b.WriteString(`{"jobs": [`)
			for i := first; i < min(first+per, int64(n)); i++ {
				if i > first {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"name": %q, "properties": %s}`, name(int(i)), props(int(i)))
			}
			b.WriteString(`]}`)
			if err := bulk(nc, c, b.String()); err != nil {
				return err
			}
		}
		return nil
	})
}

func bulk(nc *nats.Conn, c, body string) error {
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
