package arm

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// apiError is an ARM error answer: {"error": {"code", "message", "details"}}. Its message never
// repeats the request, which can hold secrets.
type apiError struct {
	Status  int
	Code    string
	Message string
	Details []errorDetail
}

type errorDetail struct {
	Code    string `json:"code"`
	Target  string `json:"target,omitempty"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func badRequest(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "BadRequest", Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: "ResourceNotFound", Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusConflict, Code: "Conflict", Message: fmt.Sprintf(format, args...)}
}

// writeError writes err as ARM does; an error that is not an *apiError is an internal one, its
// text logged by the caller and not shown.
func writeError(w http.ResponseWriter, err error) {
	e, ok := err.(*apiError)
	if !ok {
		e = &apiError{Status: http.StatusInternalServerError, Code: "InternalError", Message: "internal error; try again"}
	}
	body := map[string]any{"error": struct {
		Code    string        `json:"code"`
		Message string        `json:"message"`
		Details []errorDetail `json:"details,omitempty"`
	}{e.Code, e.Message, e.Details}}
	writeJSON(w, e.Status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":{"code":"InternalError","message":"encode the answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}
