package dashboard

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/gateway/internal/access"
	"github.com/resched/resched/services/gateway/internal/schedapi"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/timezone"
)

//go:embed assets
var assets embed.FS

// Authenticator finds who calls.
type Authenticator interface {
	Authenticate(r *http.Request) (access.Grant, error)
}

// Config is what the dashboard needs.
type Config struct {
	NATS *nats.Conn
	// Requests carries the requests to the planners; nil: NATS. The gateway's connection ends a
	// request in flight when it is lost (natsconn.Conn).
	Requests schedapi.Requester
	Subjects bus.Subjects
	// JetStreamAPI is the subject prefix of JetStream's API ($JS.API, or $JS.<domain>.API
	// where the streams live in another domain): the backlog is asked of it. Empty: $JS.API.
	JetStreamAPI string
	Auth         Authenticator
	Logger       *slog.Logger
	Timeout      time.Duration // bound on one request to the planners
}

// Server serves the dashboard.
type Server struct {
	stop   context.CancelFunc // ends the backlog sampling
	cfg    Config
	api    schedapi.Client
	scopes *scopes
	hub    *hub
	mux    *http.ServeMux
	// keepAlive is how often the live stream writes a comment while it has nothing to say (so
	// that proxies keep it open) and checks the caller's token again.
	keepAlive time.Duration
	// A jobs listing's bound: planner reads, and time (walk.go).
	listingReads int
	listingTime  time.Duration
	now          func() time.Time
}

// New builds the dashboard and subscribes to the live messages.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Requests == nil {
		cfg.Requests = cfg.NATS
	}
	s := &Server{cfg: cfg, api: schedapi.Client{NC: cfg.Requests, Subjects: cfg.Subjects}, keepAlive: 15 * time.Second,
		listingReads: listingReads, listingTime: listingTime, now: time.Now}
	s.scopes = newScopes(s.api)
	s.hub = newHub(s.scopes)
	if err := s.hub.start(cfg.NATS, cfg.Subjects); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.hub.sampleBacklog(ctx, s.backlog)
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s.mux = http.NewServeMux()
	s.mux.Handle("GET /dashboard/", http.StripPrefix("/dashboard/", http.FileServer(http.FS(static))))
	// A relative Location (http.Redirect would make it absolute): behind a proxy that serves
	// the gateway under a path, /resched/dashboard leads to /resched/dashboard/.
	s.mux.HandleFunc("GET /dashboard", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "dashboard/")
		w.WriteHeader(http.StatusMovedPermanently)
	})
	api := func(pattern string, write bool, h func(*call) (any, error)) {
		s.mux.HandleFunc(pattern, s.endpoint(write, h))
	}
	api("GET /dashboard/api/me", false, func(c *call) (any, error) {
		return map[string]any{"subject": c.grant.Subject, "role": c.grant.Role, "scopes": c.grant.Scopes}, nil
	})
	api("GET /dashboard/api/overview", false, s.overview)
	api("GET /dashboard/api/collections", false, s.collections)
	api("GET /dashboard/api/jobs", false, s.jobs)
	api("GET /dashboard/api/jobs/{c}/{j}", false, s.job)
	api("GET /dashboard/api/jobs/{c}/{j}/history", false, s.history)
	api("POST /dashboard/api/jobs/{c}/{j}/run", true, s.jobOp("run"))
	api("POST /dashboard/api/jobs/{c}/{j}/enable", true, s.setState(job.StateEnabled))
	api("POST /dashboard/api/jobs/{c}/{j}/disable", true, s.setState(job.StateDisabled))
	api("DELETE /dashboard/api/jobs/{c}/{j}", true, s.jobOp("delete"))
	api("PUT /dashboard/api/jobs/{c}/{j}", true, s.putJob)
	api("PUT /dashboard/api/collections/{c}", true, s.putCollection)
	api("POST /dashboard/api/preview", false, s.preview)
	s.mux.HandleFunc("GET /dashboard/api/live", s.live)
	return s, nil
}

// Close stops the dashboard's background work.
func (s *Server) Close() { s.stop() }

// ServeHTTP serves the assets and the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

// call is one API request.
type call struct {
	ctx   context.Context
	r     *http.Request
	grant access.Grant
	body  []byte
}

// httpError is an error answer of the dashboard's API: {"error": {"code", "message", "details"}}.
type httpError struct {
	Status  int              `json:"-"`
	Code    string           `json:"code"`
	Message string           `json:"message"`
	Details []bus.ErrorEntry `json:"details,omitempty"`
}

func (e *httpError) Error() string { return e.Message }

// endpoint serves one route of the dashboard's API and logs the request as the REST API does
// (method, path, status, time, caller), so that a change made in the page is on record with
// who made it: changes and refusals at info, reads that succeed at debug (a page makes dozens).
func (s *Server) endpoint(write bool, h func(*call) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		status, caller := s.serve(w, r, write, h)
		s.logRequest(r, write, status, caller, time.Since(start))
	}
}

// logRequest logs one request of the dashboard's API: changes and refusals at info, reads
// that succeed at debug.
func (s *Server) logRequest(r *http.Request, write bool, status int, caller string, took time.Duration) {
	level := slog.LevelDebug
	if write || status >= 400 {
		level = slog.LevelInfo
	}
	s.cfg.Logger.Log(r.Context(), level, "dashboard request", "method", r.Method, "path", r.URL.Path, "status", status,
		"took_ms", float64(took.Microseconds())/1e3, "caller", caller)
}

// serve answers one API request; it returns the status written and who asked ("" when the
// token was refused).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, write bool, h func(*call) (any, error)) (int, string) {
	g, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		return writeErr(w, &httpError{Status: http.StatusUnauthorized, Code: "Unauthorized", Message: err.Error()}), ""
	}
	if write && !g.CanWrite() {
		return writeErr(w, &httpError{Status: http.StatusForbidden, Code: "Forbidden", Message: "the role reader does not allow this"}), g.Subject
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	c := &call{ctx: ctx, r: r, grant: g}
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		if c.body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10)); err != nil {
			return writeErr(w, &httpError{Status: http.StatusBadRequest, Code: "BadRequest", Message: "the body is too large"}), g.Subject
		}
	}
	out, err := h(c)
	if err != nil {
		var he *httpError
		var se *schedapi.Error
		switch {
		case errors.As(err, &he):
		case errors.As(err, &se):
			he = &httpError{Status: se.Status, Code: se.Code, Message: se.Message, Details: se.Details}
		default:
			s.cfg.Logger.Error("dashboard request failed", "path", r.URL.Path, "error", err)
			he = &httpError{Status: http.StatusInternalServerError, Code: "InternalError", Message: "internal error; try again"}
		}
		return writeErr(w, he), g.Subject
	}
	writeJSON(w, http.StatusOK, out)
	return http.StatusOK, g.Subject
}

// writeErr writes an error answer and returns its status.
func writeErr(w http.ResponseWriter, e *httpError) int {
	writeJSON(w, e.Status, map[string]any{"error": e})
	return e.Status
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// collection reads a collection the grant may see; any other is not found.
func (s *Server) collection(c *call, name string) (job.Collection, error) {
	var coll job.Collection
	if _, err := s.api.Call(c.ctx, nil, &coll, "collections", "get", name); err != nil {
		return coll, err
	}
	if !visible(c.grant, coll.Tags[armScopeTag]) {
		return coll, &httpError{Status: http.StatusNotFound, Code: "ResourceNotFound", Message: "job collection " + name + " not found"}
	}
	return coll, nil
}

// collectionInfos is what the overview shows of the visible collections (those of the first
// pickerReads pages of the planners' listing; more when it goes on), and how many the caller
// may see in all (-1: unknown).
func (s *Server) collectionInfos(c *call) ([]collectionInfo, bool, int, error) {
	all, more, total, err := s.visibleCollections(c)
	if err != nil {
		return nil, false, 0, err
	}
	return infosOf(all), more, total, nil
}

// collections answers the pages' collection pickers: the first pickerMatches collections the
// caller may see whose names start with prefix (every name when it is empty), searched from it
// on, so that a picker reaches every collection as the user types. It answered the first
// 10,000 at once, 700 KB with 50,000 collections, and a collection past them was not offered.
func (s *Server) collections(c *call) (any, error) {
	found, more, err := s.matchingCollections(c, c.r.URL.Query().Get("prefix"), pickerMatches)
	if err != nil {
		return nil, err
	}
	return map[string]any{"value": infosOf(found), "more": more}, nil
}

// infosOf is what the pages show of each collection.
func infosOf(colls []job.Collection) []collectionInfo {
	out := make([]collectionInfo, len(colls))
	for i, coll := range colls {
		out[i] = infoOf(coll)
	}
	return out
}

// overviewCollections is how many collections the overview's table shows, the first by name.
const overviewCollections = 100

// overview is the overview's figures; with collections=none, those of the last hour alone (the
// page reads them again as results come, and a result changes no collection: reading every
// collection each time would cost the planners a page of 1,000 a read).
func (s *Server) overview(c *call) (any, error) {
	minutes, failures := s.hub.lastHour(c.ctx, c.grant)
	out := map[string]any{"minutes": minutes, "failures": failures}
	if c.r.URL.Query().Get("collections") != "none" {
		infos, more, total, err := s.collectionInfos(c)
		if err != nil {
			return nil, err
		}
		// The count stops at the collections read unless the planners counted them all.
		count := len(infos)
		if total >= 0 {
			count, more = total, false
		}
		out["collections"], out["collectionCount"], out["moreCollections"] = infos[:min(len(infos), overviewCollections)], count, more
	}
	if backlog, ok := s.backlog(c.ctx); ok {
		out["backlog"] = backlog
	}
	return out, nil
}

// backlog is the due occurrences waiting for a worker: the workers' consumer's pending count.
func (s *Server) backlog(ctx context.Context) (map[string]uint64, bool) {
	subject := cmp.Or(s.cfg.JetStreamAPI, "$JS.API") + ".CONSUMER.INFO." + s.cfg.Subjects.DueStream() + "." + bus.WorkerConsumer
	msg, err := s.cfg.NATS.RequestWithContext(ctx, subject, nil)
	if err != nil {
		return nil, false
	}
	var info struct {
		NumPending    uint64    `json:"num_pending"`
		NumAckPending uint64    `json:"num_ack_pending"`
		Error         *struct{} `json:"error"` // no such consumer, in this JetStream or at all
	}
	if json.Unmarshal(msg.Data, &info) != nil || info.Error != nil {
		return nil, false
	}
	return map[string]uint64{"waiting": info.NumPending, "inFlight": info.NumAckPending}, true
}

func (s *Server) job(c *call) (any, error) {
	coll, err := s.collection(c, c.r.PathValue("c"))
	if err != nil {
		return nil, err
	}
	var d job.Definition
	if _, err := s.api.Call(c.ctx, nil, &d, "jobs", "get", coll.Name, c.r.PathValue("j")); err != nil {
		return nil, err
	}
	var runs struct {
		Value  []string `json:"value"`
		Reason string   `json:"reason"`
	}
	_, _ = s.api.Call(c.ctx, map[string]int{"count": 20}, &runs, "jobs", "runs", coll.Name, c.r.PathValue("j"))
	return map[string]any{"collection": infoOf(coll), "job": d, "runs": runs.Value, "local": inZone(runs.Value, d.Properties.Recurrence),
		"reason": runs.Reason, "secrets": secretParts(d.Properties.Action)}, nil
}

// secretParts names the headers and query parameters of an action's and its error action's
// request that hold a secret (an Authorization or API-key header, an Azure Function's code):
// the planners answer their values empty, and the page says they are set.
func secretParts(a *job.Action) []string {
	out := []string{}
	if a == nil {
		return out
	}
	specs := []*job.ActionSpec{&a.ActionSpec}
	if a.ErrorAction != nil {
		specs = append(specs, &a.ErrorAction.ActionSpec)
	}
	for i, spec := range specs {
		if spec.Request == nil {
			continue
		}
		var names []string
		for name := range spec.Request.Headers {
			if job.IsSecretMember("headers", name) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		at := []string{"action", "errorAction"}[i] + ".request."
		for _, name := range names {
			out = append(out, at+"headers."+name)
		}
		if u, err := url.Parse(spec.Request.URI); err == nil {
			names = names[:0]
			for name := range u.Query() {
				if job.IsSecretMember("query", name) {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			for _, name := range names {
				out = append(out, at+"uri ?"+name)
			}
		}
	}
	return out
}

func (s *Server) history(c *call) (any, error) {
	coll, err := s.collection(c, c.r.PathValue("c"))
	if err != nil {
		return nil, err
	}
	q := c.r.URL.Query()
	req := map[string]any{"top": 25}
	if v := q.Get("status"); v != "" {
		req["status"] = v
	}
	if v := q.Get("after"); v != "" {
		req["after"] = v
	}
	var page struct {
		Value    []job.HistoryEntry `json:"value"`
		NextLink map[string]any     `json:"nextLink"`
	}
	if _, err := s.api.Call(c.ctx, req, &page, "jobs", "history", coll.Name, c.r.PathValue("j")); err != nil {
		return nil, err
	}
	next := ""
	if page.NextLink != nil {
		next, _ = page.NextLink["after"].(string)
	}
	if page.Value == nil {
		page.Value = []job.HistoryEntry{}
	}
	return map[string]any{"value": page.Value, "next": next}, nil
}

func (s *Server) jobOp(op string) func(*call) (any, error) {
	return func(c *call) (any, error) {
		coll, err := s.collection(c, c.r.PathValue("c"))
		if err != nil {
			return nil, err
		}
		if _, err := s.api.Call(c.ctx, nil, nil, "jobs", op, coll.Name, c.r.PathValue("j")); err != nil {
			return nil, err
		}
		return map[string]string{}, nil
	}
}

func (s *Server) setState(state job.State) func(*call) (any, error) {
	return func(c *call) (any, error) {
		coll, err := s.collection(c, c.r.PathValue("c"))
		if err != nil {
			return nil, err
		}
		var d job.Definition
		_, err = s.api.Call(c.ctx, map[string]any{"properties": map[string]any{"state": state}}, &d, "jobs", "patch", coll.Name, c.r.PathValue("j"))
		return d, err
	}
}

func (s *Server) putJob(c *call) (any, error) {
	coll, err := s.collection(c, c.r.PathValue("c"))
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(s.cfg.Subjects.API("jobs", "put", coll.Name, c.r.PathValue("j")))
	msg.Data = c.body
	// A page that creates a job (the builder) asks not to replace one of the same name: the
	// planners answer 409 rather than overwrite its action, secrets included.
	if c.r.Header.Get("If-None-Match") == "*" {
		msg.Header.Set("If-None-Match", "*")
	}
	var d job.Definition
	_, err = s.api.Send(c.ctx, msg, &d)
	return d, err
}

// putCollection creates a collection on NATS (without an ARM scope): only a grant of every
// scope may, since no scope would cover it otherwise. An existing collection is left alone.
func (s *Server) putCollection(c *call) (any, error) {
	if !visible(c.grant, "") {
		return nil, &httpError{Status: http.StatusForbidden, Code: "Forbidden",
			Message: "a collection made here has no subscription or resource group: only a grant of every scope (\"*\") may make one; use the REST API for a scoped one"}
	}
	msg := nats.NewMsg(s.cfg.Subjects.API("collections", "put", c.r.PathValue("c")))
	msg.Header.Set("If-None-Match", "*")
	msg.Data = c.body
	var coll job.Collection
	if _, err := s.api.Send(c.ctx, msg, &coll); err != nil {
		return nil, err
	}
	return infoOf(coll), nil
}

func (s *Server) preview(c *call) (any, error) {
	var out json.RawMessage
	_, err := s.api.Call(c.ctx, c.body, &out, "preview")
	return out, err
}

// live streams the events and results the grant may see as server-sent events, with a comment
// every 15 s so that proxies keep the connection and the page knows it is alive; the token is
// checked again each time.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	g, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		status := writeErr(w, &httpError{Status: http.StatusUnauthorized, Code: "Unauthorized", Message: err.Error()})
		s.logRequest(r, false, status, "", time.Since(start))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, &httpError{Status: http.StatusInternalServerError, Code: "InternalError", Message: "streaming unsupported"})
		return
	}
	// Subscribed before the page hears it is connected: what happens after that reaches it.
	sub := s.hub.subscribe(g)
	defer s.hub.unsubscribe(sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": connected\n\n")
	flusher.Flush()
	tick := time.NewTicker(s.keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case data := <-sub.out:
			_, _ = io.WriteString(w, "data: ")
			_, _ = w.Write(data)
			_, _ = io.WriteString(w, "\n\n")
		case <-tick.C:
			// The token is checked again: one that expired (a JWT) or no longer gives the same
			// grant ends the stream, and the page's reconnection is answered by what holds now.
			if now, err := s.cfg.Auth.Authenticate(r); err != nil || !sameGrant(now, g) {
				return
			}
			_, _ = io.WriteString(w, ": alive\n\n")
		}
		flusher.Flush()
	}
}

func sameGrant(a, b access.Grant) bool {
	return a.Subject == b.Subject && a.Role == b.Role && slices.Equal(a.Scopes, b.Scopes)
}

// inZone gives times (RFC 3339) in the schedule's time zone, so the page sees its offsets and a
// change of them (daylight saving); as they are without a zone.
func inZone(times []string, rec *job.Recurrence) []string {
	if rec == nil || rec.TimeZone == "" {
		return times
	}
	loc, err := timezone.Load(rec.TimeZone)
	if err != nil {
		return times
	}
	out := make([]string, len(times))
	for i, v := range times {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return times
		}
		out[i] = t.In(loc).Format(time.RFC3339)
	}
	return out
}
