package api

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Metrics records each answered request: its endpoint, the HTTP-like status of the answer
// (200, or the error's) and the time from its arrival to its answer. Package metrics
// implements it for /metrics.
type Metrics interface {
	APIRequest(endpoint string, code int, took time.Duration)
}

// endpointStats are what one endpoint answered, for the data of `nats micro stats`. micro's
// own figures time a handler until it returns, and ours return as soon as a worker has the
// request: they count the requests right but see none of the errors and only the hand-over's
// time. These count the answers.
type endpointStats struct {
	mu        sync.Mutex
	answered  int
	errors    int
	lastError string
	took      time.Duration
}

// statsData is the endpoint's data in micro's stats reply, named like micro's own fields.
type statsData struct {
	Answered              int           `json:"num_answered"`
	Errors                int           `json:"num_errors"`
	LastError             string        `json:"last_error,omitempty"`
	ProcessingTime        time.Duration `json:"processing_time"`
	AverageProcessingTime time.Duration `json:"average_processing_time"`
}

func (s *endpointStats) record(code int, message string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answered++
	s.took += took
	if code != 200 {
		s.errors++
		s.lastError = message
	}
}

func (s *endpointStats) data() statsData {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := statsData{Answered: s.answered, Errors: s.errors, LastError: s.lastError, ProcessingTime: s.took}
	if s.answered > 0 {
		d.AverageProcessingTime = s.took / time.Duration(s.answered)
	}
	return d
}

// answer is a request's answer: its status and, for an error, its message, then what is sent.
type answer struct {
	code    int
	message string
	data    []byte
	header  nats.Header
}

// answer counts the answer of a request of endpoint e that arrived at start, then sends it: a
// client that has its answer finds it counted.
func (a *handlers) answer(e string, start time.Time, req micro.Request, ans answer) {
	a.observe(e, start, ans)
	a.send(req, ans)
}

// observe records an answered request of endpoint e that arrived at start.
func (a *handlers) observe(e string, start time.Time, ans answer) {
	took := time.Since(start)
	if s := a.stats[e]; s != nil {
		s.record(ans.code, ans.message, took)
	}
	if a.metrics != nil {
		a.metrics.APIRequest(e, ans.code, took)
	}
}

// statsOf is micro's StatsHandler: the endpoint's answers, as data beside micro's counts.
func (a *handlers) statsOf(e *micro.Endpoint) any {
	if s := a.stats[e.Name]; s != nil {
		return s.data()
	}
	return nil
}
