package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/shared/job"
)

// pageRequest is the paging of a list request; it is also what nextLink holds.
type pageRequest struct {
	Top   int    `json:"top"`
	Skip  int    `json:"skip"`
	After string `json:"after"`
}

func (p pageRequest) check() error {
	switch {
	case p.Top < 0:
		return badRequest("top", "must be 0 (the default page size) or more")
	case p.Skip < 0:
		return badRequest("skip", "must be 0 or more")
	}
	return nil
}

func (p pageRequest) jobs() jobs.PageRequest {
	return jobs.PageRequest{Top: p.Top, Skip: p.Skip, After: p.After}
}

// jobListRequest is the body of jobs.list: paging and an optional state, any casing.
type jobListRequest struct {
	Top   int    `json:"top"`
	Skip  int    `json:"skip"`
	After string `json:"after"`
	State string `json:"state"`
}

// historyRequest is the body of jobs.history: paging and an optional status, any casing.
type historyRequest struct {
	Top    int    `json:"top"`
	Skip   int    `json:"skip"`
	After  string `json:"after"`
	Status string `json:"status"`
}

// jsonKind names a Go kind as the JSON value a request must give for it.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return "a JSON " + k.String()
}

// decodeBody reads an optional JSON object: an empty body leaves v at its defaults.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return badRequest(typeErr.Field, "must be "+jsonKind(typeErr.Type.Kind()))
		}
		return badRequest("", "the body is not a JSON object: "+err.Error())
	}
	return nil
}

func decodePage(body []byte) (jobs.PageRequest, error) {
	var r pageRequest
	if err := decodeBody(body, &r); err != nil {
		return jobs.PageRequest{}, err
	}
	return r.jobs(), r.check()
}

func decodeJobList(body []byte) (job.State, jobs.PageRequest, error) {
	var r jobListRequest
	if err := decodeBody(body, &r); err != nil {
		return "", jobs.PageRequest{}, err
	}
	page := pageRequest{Top: r.Top, Skip: r.Skip, After: r.After}
	if err := page.check(); err != nil || r.State == "" {
		return "", page.jobs(), err
	}
	state, err := job.ParseState(r.State)
	if err != nil {
		return "", jobs.PageRequest{}, badRequest("state", err.Error())
	}
	return state, page.jobs(), nil
}

func decodeHistory(body []byte) (job.ExecutionStatus, jobs.PageRequest, error) {
	var r historyRequest
	if err := decodeBody(body, &r); err != nil {
		return "", jobs.PageRequest{}, err
	}
	page := pageRequest{Top: r.Top, Skip: r.Skip, After: r.After}
	if err := page.check(); err != nil || r.Status == "" {
		return "", page.jobs(), err
	}
	status, err := job.ParseExecutionStatus(r.Status)
	if err != nil {
		return "", jobs.PageRequest{}, badRequest("status", err.Error())
	}
	return status, page.jobs(), nil
}

// checkCount checks how many runs a preview or a job's runs asks for. More than a page is
// refused rather than cut: these lists have no next page, so a shorter answer would read as
// a series that ends.
func checkCount(n int) error {
	switch {
	case n < 0:
		return badRequest("count", "must be 0 (the default, 10) or more")
	case n > jobs.MaxPageSize:
		return badRequest("count", fmt.Sprintf("must be at most %d", jobs.MaxPageSize))
	}
	return nil
}

// previewRequest is the body of preview; now is RFC 3339 (the planner's clock when absent).
type previewRequest struct {
	Job   json.RawMessage `json:"job"`
	Now   string          `json:"now"`
	Count int             `json:"count"`
}

// decodePreview reads {"job": …, "now": …, "count": N}; the job itself is checked by the service.
func decodePreview(body []byte) (jobs.PreviewRequest, error) {
	var r previewRequest
	if err := decodeBody(body, &r); err != nil {
		return jobs.PreviewRequest{}, err
	}
	def := bytes.TrimSpace(r.Job)
	if len(def) == 0 || bytes.Equal(def, []byte("null")) {
		return jobs.PreviewRequest{}, badRequest("job", "required: the job definition to preview")
	}
	if err := checkCount(r.Count); err != nil {
		return jobs.PreviewRequest{}, err
	}
	out := jobs.PreviewRequest{Job: r.Job, Count: r.Count}
	if r.Now != "" {
		now, err := time.Parse(time.RFC3339, r.Now)
		if err != nil {
			return jobs.PreviewRequest{}, badRequest("now", fmt.Sprintf("%q is not an RFC 3339 time such as 2016-03-30T20:40:35Z", r.Now))
		}
		out.Now = &now
	}
	return out, nil
}
