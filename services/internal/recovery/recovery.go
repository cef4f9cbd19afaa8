// Package recovery turns a panic while one message or request is handled into an error for
// that one alone, which the caller logs with its stack. Without it, an input that trips a bug stops the
// process, and a message redelivered after the crash (a due occurrence, a stored job read at
// every round) then stops each process that takes it in turn: one job could stop every
// worker or every planner. River and asynq recover a job's panic the same way.
package recovery

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
)

// Panic is the error of a call that panicked. Its text never has the panic's value: a value
// can quote the input (a job's definition, a secret in it), and the error goes where the
// input's readers see it (a reply, a job's history).
type Panic struct {
	Value any
	Stack []byte
}

func (p *Panic) Error() string {
	return "an internal error (a panic; the process's log has its stack, after \"panic recovered\")"
}

// Call returns what f returns or, when f panics, a *Panic error. It logs nothing itself: the
// caller logs the panic with what it knows of the input (Panic.Log), and a call that does not
// panic costs no more than the deferred check.
func Call[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, &Panic{Value: r, Stack: debug.Stack()}
		}
	}()
	return f()
}

// Log writes the panic at error level with its stack; args say what was handled (names, never
// values of the input).
func (p *Panic) Log(log *slog.Logger, what string, args ...any) {
	log.Error("panic recovered: "+what, append(args, "panic", describe(p.Value), "stack", string(p.Stack))...)
}

// describe says what panicked for the log: a runtime error in full (an index out of range,
// a nil dereference: no input in it), any other value by its type only.
func describe(r any) string {
	if e, ok := r.(runtime.Error); ok {
		return e.Error()
	}
	return fmt.Sprintf("a value of type %T", r)
}
