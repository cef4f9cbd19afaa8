package arm

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's request counters, by operation and status code.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "resched_gateway_requests_total",
			Help: "Requests answered, by operation (the swagger's operationId) and HTTP status."}, []string{"operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "resched_gateway_request_duration_seconds",
			Help:    "Time to answer a request, by operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}}, []string{"operation"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

func (m *metrics) observe(operation string, code int, took time.Duration) {
	m.requests.WithLabelValues(operation, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(operation).Observe(took.Seconds())
}
