package arm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

const jobType = "Microsoft.Scheduler/jobCollections/jobs"

// toARMJob gives a planner's job its ARM id, name and type, and echoes what the service
// echoed: interval 1 when the definition left it out, and no status for a disabled job.
func toARMJob(s scope, collection string, d job.Definition) armJob {
	name := d.Name
	if _, j, ok := strings.Cut(d.Name, "/"); ok {
		name = j
	}
	d.ID, d.Type, d.Name = jobID(s, collection, name), jobType, collection+"/"+name
	if r := d.Properties.Recurrence; r != nil && r.Interval == 0 {
		r.Interval = 1
	}
	if d.Properties.State == job.StateDisabled {
		d.Properties.Status = nil
	}
	return armJob{d}
}

// armJob is a job as the gateway answers it. A monthly occurrence's count is written under
// both spellings: "occurrence", as the service answered it, and "Occurrence", the swagger's,
// the only one clients generated from the swagger read. Python's azure-mgmt-scheduler read no
// count from "occurrence", so a "last Friday" job it read and put back ran every Friday.
// Clients that match names without case (Go, .NET) read the one value either way.
type armJob struct{ job.Definition }

func (j armJob) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(j.Definition)
	if err != nil || !countsOccurrences(j.Definition) {
		return b, err
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	props, _ := tree["properties"].(map[string]any)
	rec, _ := props["recurrence"].(map[string]any)
	sched, _ := rec["schedule"].(map[string]any)
	occs, _ := sched["monthlyOccurrences"].([]any)
	for _, o := range occs {
		if o, ok := o.(map[string]any); ok && o["occurrence"] != nil {
			o["Occurrence"] = o["occurrence"]
		}
	}
	return json.Marshal(tree)
}

// countsOccurrences says whether the job has a monthly occurrence with a count, the only
// jobs armJob writes again.
func countsOccurrences(d job.Definition) bool {
	r := d.Properties.Recurrence
	if r == nil || r.Schedule == nil {
		return false
	}
	for _, o := range r.Schedule.MonthlyOccurrences {
		if o.Occurrence != 0 {
			return true
		}
	}
	return false
}

// jobCall is the path's job on the planners: their collection name and the job's. The job's
// name is checked here, as the collection's is, so that a refusal names the swagger's path
// parameter (jobName); schedapi.Call would refuse a name the NATS API cannot carry too, in
// that API's words, rather than send it to no planner.
func (c *call) plannerJob() ([]string, error) {
	pname, err := c.plannerCollection()
	if err != nil {
		return nil, err
	}
	if err := bus.CheckName("job", c.vars["j"]); err != nil {
		return nil, badRequest("jobName %q: 1 to 64 letters, digits, '-' or '_'", c.vars["j"])
	}
	return []string{pname, c.vars["j"]}, nil
}

func (s *Server) getJob(c *call) error {
	return s.jobOp(c, "get", nil, http.StatusOK)
}

func (s *Server) putJob(c *call) error { return s.jobOp(c, "put", c.body, 0) }

func (s *Server) patchJob(c *call) error { return s.jobOp(c, "patch", c.body, http.StatusOK) }

// jobOp sends a job operation that answers the job; status 0 takes 201 or 200 from the planner.
func (s *Server) jobOp(c *call, op string, body []byte, status int) error {
	names, err := c.plannerJob()
	if err != nil {
		return err
	}
	var d job.Definition
	reply, err := s.planners.call(c.ctx, body, &d, "jobs", op, names[0], names[1])
	if err != nil {
		return s.jobError(c, err)
	}
	if status == 0 {
		status = createdStatus(reply)
	}
	writeJSON(c.w, status, toARMJob(c.scope(), c.vars["c"], d))
	return nil
}

// jobError names the ARM collection in a planner's "collection not found".
func (s *Server) jobError(c *call, err error) error {
	if e, ok := err.(*apiError); ok && e.Status == http.StatusNotFound {
		if strings.Contains(e.Message, "collection") {
			return notFound("the job collection %s was not found", c.vars["c"])
		}
		return notFound("the job %s was not found in job collection %s", c.vars["j"], c.vars["c"])
	}
	return err
}

func (s *Server) deleteJob(c *call) error { return s.jobAction(c, "delete") }
func (s *Server) runJob(c *call) error    { return s.jobAction(c, "run") }

// jobAction deletes or runs a job: 200 and no body, as the clients expect.
func (s *Server) jobAction(c *call, op string) error {
	names, err := c.plannerJob()
	if err != nil {
		return err
	}
	if _, err := s.planners.call(c.ctx, nil, nil, "jobs", op, names[0], names[1]); err != nil {
		return s.jobError(c, err)
	}
	c.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) listJobs(c *call) error {
	pname, err := c.plannerCollection()
	if err != nil {
		return err
	}
	req, err := pageRequest(c.r, "state", func(v string) (string, error) {
		st, err := job.ParseState(v)
		return string(st), err
	})
	if err != nil {
		return err
	}
	var page struct {
		Value    []job.Definition `json:"value"`
		NextLink json.RawMessage  `json:"nextLink"`
	}
	if _, err := s.planners.call(c.ctx, req, &page, "jobs", "list", pname); err != nil {
		return s.jobError(c, err)
	}
	value := make([]armJob, len(page.Value))
	for i, d := range page.Value {
		value[i] = toARMJob(c.scope(), c.vars["c"], d)
	}
	writeJSON(c.w, http.StatusOK, listResult(value, s.nextLink(c, page.NextLink)))
	return nil
}

// listResult is {"value": [...], "nextLink": "<url>"}, nextLink left out on the last page.
func listResult[T any](value []T, next string) any {
	if next == "" {
		return struct {
			Value []T `json:"value"`
		}{value}
	}
	return struct {
		Value    []T    `json:"value"`
		NextLink string `json:"nextLink"`
	}{value, next}
}

// nextLink is the absolute URL of the next page: the request's path and api-version, and the
// planners' continuation (cursor and filter) as $skiptoken.
func (s *Server) nextLink(c *call, planner json.RawMessage) string {
	if len(planner) == 0 || string(planner) == "null" {
		return ""
	}
	q := url.Values{"api-version": {APIVersion}, "$skiptoken": {base64.RawURLEncoding.EncodeToString(planner)}}
	return s.baseURL(c.r) + c.r.URL.EscapedPath() + "?" + q.Encode()
}

// skipToken reads $skiptoken, the planners' continuation a nextLink carries; nil without one.
func skipToken(r *http.Request) (json.RawMessage, error) {
	tok := r.URL.Query().Get("$skiptoken")
	if tok == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !json.Valid(raw) {
		return nil, badRequest("$skiptoken is not one this gateway gave out")
	}
	return raw, nil
}

// filterExpr is the one $filter form of the swagger: "<field> eq <value>", the value quoted
// (Go SDK) or not (.NET).
var filterExpr = regexp.MustCompile(`(?i)^\s*(\w+)\s+eq\s+'?([A-Za-z]+)'?\s*$`)

// pageRequest reads $top, $skip, $filter on field and $skiptoken into the planners' paging
// request; parse checks and normalises the filter's value.
func pageRequest(r *http.Request, field string, parse func(string) (string, error)) (any, error) {
	q := r.URL.Query()
	if tok, err := skipToken(r); err != nil || tok != nil {
		return tok, err
	}
	top, err := queryInt(r, "$top", 1, 100)
	if err != nil {
		return nil, err
	}
	skip, err := queryInt(r, "$skip", 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	req := map[string]any{}
	if top > 0 {
		req["top"] = top
	}
	if skip > 0 {
		req["skip"] = skip
	}
	if f := q.Get("$filter"); f != "" {
		m := filterExpr.FindStringSubmatch(f)
		if m == nil || !strings.EqualFold(m[1], field) {
			return nil, badRequest("$filter=%q: the only filter here is \"%s eq '<value>'\"", f, field)
		}
		v, err := parse(m[2])
		if err != nil {
			return nil, badRequest("$filter: %v", err)
		}
		req[field] = v
	}
	return req, nil
}

// historyResource is a history entry as ARM answers it: a resource.
type historyResource struct {
	ID         string           `json:"id"`
	Type       string           `json:"type"`
	Name       string           `json:"name"`
	Properties job.HistoryEntry `json:"properties"`
}

func (s *Server) listHistory(c *call) error {
	names, err := c.plannerJob()
	if err != nil {
		return err
	}
	req, err := pageRequest(c.r, "status", func(v string) (string, error) {
		st, err := job.ParseExecutionStatus(v)
		return string(st), err
	})
	if err != nil {
		return err
	}
	var page struct {
		Value    []job.HistoryEntry `json:"value"`
		NextLink json.RawMessage    `json:"nextLink"`
	}
	if _, err := s.planners.call(c.ctx, req, &page, "jobs", "history", names[0], names[1]); err != nil {
		return s.jobError(c, err)
	}
	base := jobID(c.scope(), c.vars["c"], c.vars["j"])
	value := make([]historyResource, len(page.Value))
	for i, e := range page.Value {
		id := e.ID()
		value[i] = historyResource{ID: base + "/history/" + id, Type: jobType + "/history",
			Name: c.vars["c"] + "/" + c.vars["j"] + "/" + id, Properties: e}
	}
	writeJSON(c.w, http.StatusOK, listResult(value, s.nextLink(c, page.NextLink)))
	return nil
}
