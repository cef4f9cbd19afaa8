package arm

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/resched/resched/services/internal/testenv"
)

func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	testenv.CheckMetricsDocumented(t, "resched_gateway_", func(reg prometheus.Registerer) error {
		newMetrics(reg)
		return nil
	})
}
