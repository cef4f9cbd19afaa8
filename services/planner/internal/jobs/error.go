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
	// CodeServerBusy: the request could not be done now; sent again, it may be.
	CodeServerBusy = "ServerBusy"
	// CodeInternal: an error the client cannot act on (Redis down, a bug).
	CodeInternal = "InternalError"
)

// StoreRefused is the answer to a request that Redis refused in a way the client or the
// operator can act on, unlike an internal error; nil for any other error:
//   - at its maxmemory: nothing was stored;
//   - a change its replicas did not acknowledge in time (RESCHED_PLANNER_MIN_REPLICAS): a
//     failover could lose it, so it is sent again;
//   - Redis not answering now (store.Unavailable): sent again, the request may work.
func StoreRefused(err error) *Error {
	switch {
	case store.OutOfMemory(err):
		return &Error{Status: 507, Code: CodeInsufficientStorage, Message: "Redis is out of memory (its maxmemory): " +
			"nothing was stored. Raise Redis's maxmemory, or delete jobs or collections: listing, reading and deleting still work, and disabling a job or a collection"}
	case errors.Is(err, store.ErrNotReplicated):
		return &Error{Status: 503, Code: CodeServerBusy, Message: "Redis's replicas did not acknowledge the change in time " +
			"(RESCHED_PLANNER_MIN_REPLICAS): a failover could lose it; send the request again"}
	case store.Unavailable(err):
		// Said without the error itself, which names Redis's address to any client.
		return &Error{Status: 503, Code: CodeServerBusy, Message: "Redis did not answer the planner (down, restarting, loading its " +
			"data or failing over); send the request again"}
	}
	return nil
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

// deleting refuses a write to a collection whose delete is under way: it would be deleted with
// it, or stop the delete.
func deleting(c string) *Error {
	return conflict("job collection %s is being deleted: put it again once the delete has ended", c)
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
