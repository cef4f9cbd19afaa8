package arm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/gateway/internal/schedapi"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/jobschema"
)

// APIVersion is the only api-version served. 2014-08-01-preview and 2016-01-01 are refused
// with InvalidApiVersionParameter, naming this one: their clients speak almost the same JSON,
// but nothing here was checked against them.
const APIVersion = "2016-03-01"

// maxBody bounds a request body: a job is at most 16 KB in the original service.
const maxBody = 64 << 10

// Requester sends a request to the planners: a *nats.Conn.
type Requester = schedapi.Requester

// Authenticator finds who calls.
type Authenticator interface {
	Authenticate(r *http.Request) (access.Grant, error)
}

// Config is what a Server needs.
type Config struct {
	NATS     Requester
	Subjects bus.Subjects
	Auth     Authenticator
	Logger   *slog.Logger
	// PublicURL is the gateway's URL as clients reach it ("https://scheduler.example.com"),
	// the base of nextLinks; empty: the request's own scheme and host.
	PublicURL string
	Timeout   time.Duration // bound on one request to the planners (default 30 s)
	Metrics   prometheus.Registerer
}

// Server serves the ARM surface.
type Server struct {
	cfg         Config
	planners    planners
	collections *jobschema.Validator // a collection's body checked before it is read
	routes      []route
	metrics     *metrics
}

// New builds the server.
func New(cfg Config) (*Server, error) {
	// A collection's body is checked before the gateway reads it, so a bad field is named as
	// the planners name it rather than dropped or misread.
	collections, err := jobschema.New()
	if err != nil {
		return nil, fmt.Errorf("collection validator: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	s := &Server{cfg: cfg, planners: planners{client: schedapi.Client{NC: cfg.NATS, Subjects: cfg.Subjects}},
		collections: collections, metrics: newMetrics(cfg.Metrics)}
	s.routes = s.routeTable()
	return s, nil
}

// call is one request being served.
type call struct {
	ctx   context.Context
	w     http.ResponseWriter
	r     *http.Request
	vars  map[string]string
	grant access.Grant
	body  []byte
}

func (c *call) scope() scope { return scope{Subscription: c.vars["s"], ResourceGroup: c.vars["rg"]} }

// ServeHTTP routes a request: /healthz without a token; everything else with the api-version
// and a token that covers the subscription or resource group of the path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	name := s.serve(rec, r)
	took := time.Since(start)
	s.metrics.observe(name, rec.status, took)
	s.cfg.Logger.Info("request", "method", r.Method, "operation", name, "path", r.URL.Path, "status", rec.status,
		"took_ms", float64(took.Microseconds())/1e3, "caller", rec.caller)
}

func (s *Server) serve(w *statusRecorder, r *http.Request) string {
	if r.URL.Path == "/healthz" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
		return "healthz"
	}
	path := splitPath(r.URL.Path)
	for _, rt := range s.routes {
		vars, ok := rt.match(r.Method, path)
		if !ok {
			continue
		}
		if err := s.dispatch(w, r, rt, vars); err != nil {
			var e *apiError
			if !errors.As(err, &e) {
				s.cfg.Logger.Error("request failed", "operation", rt.name, "error", err)
			}
			writeError(w, err)
		}
		return rt.name
	}
	if pathMatches(s.routes, path) {
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: "InvalidHttpVerb", Message: "the method " + r.Method + " is not allowed on this resource"})
		return "method not allowed"
	}
	writeError(w, &apiError{Status: http.StatusNotFound, Code: "InvalidResourceType", Message: "no Microsoft.Scheduler operation at this path"})
	return "not found"
}

func (s *Server) dispatch(w *statusRecorder, r *http.Request, rt route, vars map[string]string) error {
	grant, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		code := "InvalidAuthenticationToken"
		if errors.Is(err, access.ErrNoToken) {
			code = "AuthenticationFailed"
		}
		return &apiError{Status: http.StatusUnauthorized, Code: code, Message: err.Error()}
	}
	w.caller = grant.Subject
	if err := checkAPIVersion(r.URL.Query()); err != nil {
		return err
	}
	sub, rg := vars["s"], vars["rg"]
	switch {
	case rg == "" && !grant.Touches(sub), rg != "" && !grant.Covers(sub, rg):
		return &apiError{Status: http.StatusForbidden, Code: "AuthorizationFailed",
			Message: "the client '" + grant.Subject + "' does not have authorization to perform action '" + rt.name + "' over scope '" + r.URL.Path + "'"}
	case rt.write && !grant.CanWrite():
		return &apiError{Status: http.StatusForbidden, Code: "AuthorizationFailed",
			Message: "the client '" + grant.Subject + "' has the role reader, which does not allow '" + rt.name + "'"}
	}
	c := &call{w: w, r: r, vars: vars, grant: grant}
	var cancel context.CancelFunc
	c.ctx, cancel = context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if r.Method == http.MethodPut || r.Method == http.MethodPatch {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			return badRequest("the request body is larger than %d bytes", maxBody)
		}
		if len(strings.TrimSpace(string(body))) == 0 {
			return badRequest("the request has no body: %s needs one", rt.name)
		}
		// A body sent from a file a Windows tool saved (curl --data-binary @file) starts with
		// a UTF-8 byte-order mark, which RFC 8259 lets a parser ignore and Go's refuses.
		c.body = bytes.TrimPrefix(body, []byte("\ufeff"))
	}
	return c.armNamed(rt.handle(c))
}

// armNamed writes the path's collection by its ARM name in a planners' message, which names it
// by theirs (the name and a hash of its scope: "job collection orders--abcdefghij is being
// deleted").
func (c *call) armNamed(err error) error {
	var e *apiError
	if c.vars["c"] == "" || !errors.As(err, &e) {
		return err
	}
	if pname, perr := c.scope().plannerName(c.vars["c"]); perr == nil {
		e.Message = strings.ReplaceAll(e.Message, pname, c.vars["c"])
	}
	return err
}

// checkAPIVersion refuses a missing or unsupported api-version as ARM does.
func checkAPIVersion(q map[string][]string) error {
	v := ""
	for k, vs := range q {
		if strings.EqualFold(k, "api-version") && len(vs) > 0 {
			v = vs[0]
		}
	}
	switch v {
	case APIVersion:
		return nil
	case "":
		return &apiError{Status: http.StatusBadRequest, Code: "MissingApiVersionParameter",
			Message: "The api-version query parameter (?api-version=) is required for all requests."}
	}
	return &apiError{Status: http.StatusBadRequest, Code: "InvalidApiVersionParameter",
		Message: "The api-version '" + v + "' is invalid. The supported versions are '" + APIVersion + "'."}
}

// statusRecorder keeps the status written, for the log and the metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
	caller string
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// baseURL is where a nextLink points: the configured public URL, or the request's own.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// queryInt reads an optional integer query parameter within [min, max].
func queryInt(r *http.Request, name string, min, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, badRequest("%s=%q: an integer from %d to %d", name, v, min, max)
	}
	return n, nil
}
