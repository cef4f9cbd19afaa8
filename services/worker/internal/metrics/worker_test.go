package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/resched/resched/services/internal/testenv"
)

func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	testenv.CheckMetricsDocumented(t, "resched_worker_", func(reg prometheus.Registerer) error {
		if _, err := New(reg); err != nil {
			return err
		}
		return Waiting(reg, func() int { return 0 })
	})
}
