package jobs

import (
	"errors"
	"fmt"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/jobschema"
)

// Error is an error a client can act on, in the shape Azure Resource Manager used:
// {"error": {"code", "message", "details": [{"path", "message"}]}}.
type Error struct {
	Status  int              `json:"-"` // the HTTP-like status, for the micro service's error header
	Code    string           `json:"code"`
	Message string           `json:"message"`
	Details []bus.ErrorEntry `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if len(e.Details) == 0 {
		return e.Message
	}
	s := e.Message
	for _, d := range e.Details {
		s += "\n" + d.Path + ": " + d.Message
	}
	return s
}

// The codes clients see.
const (
	CodeBadRequest          = "BadRequest"
	CodeNotFound            = "ResourceNotFound"
	CodeConflict            = "Conflict"
	CodeInsufficientStorage = "InsufficientStorage"
)

// OutOfMemory is the answer to a request that Redis refused for its maxmemory, nil for any
// other error: the client, or the operator, can act on it, unlike an internal error.
func OutOfMemory(err error) *Error {
	if !store.OutOfMemory(err) {
		return nil
	}
	return &Error{Status: 507, Code: CodeInsufficientStorage, Message: "Redis is out of memory (its maxmemory): " +
		"nothing was stored. Raise Redis's maxmemory, or delete jobs or collections: listing, reading and deleting still work"}
}

func badRequest(format string, args ...any) *Error {
	return &Error{Status: 400, Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Status: 404, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Error {
	return &Error{Status: 409, Code: CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// invalid turns a validation failure into a BadRequest with one detail per problem.
func invalid(err error) error {
	var verr *jobschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	e := &Error{Status: 400, Code: CodeBadRequest, Message: "the definition is invalid"}
	for _, p := range verr.Problems {
		e.Details = append(e.Details, bus.ErrorEntry{Path: p.Path, Message: p.Message})
	}
	return e
}
