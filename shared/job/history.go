package job

import (
	"strconv"
	"time"
)

// HistoryEntry records one attempt at one occurrence (Azure's JobHistoryDefinitionProperties).
type HistoryEntry struct {
	StartTime             time.Time       `json:"startTime"`
	EndTime               time.Time       `json:"endTime"`
	ExpectedExecutionTime time.Time       `json:"expectedExecutionTime"`
	ActionName            ActionName      `json:"actionName"`
	Status                ExecutionStatus `json:"status"`
	Message               string          `json:"message,omitempty"`
	RetryCount            int             `json:"retryCount"`  // 0 for the first attempt
	RepeatCount           int             `json:"repeatCount"` // the occurrence number, from 1
}

// ID names an entry by what makes it unique: its start (to the millisecond), its action and
// its attempt, as "<start ms>M0" (E for the error action). The REST surface answers it as the
// entry's resource name.
func (e HistoryEntry) ID() string {
	action := "M"
	if e.ActionName == ActionNameError {
		action = "E"
	}
	return strconv.FormatInt(e.StartTime.UnixMilli(), 10) + action + strconv.Itoa(e.RetryCount)
}

// CutMessage shortens a history message to at most n bytes without splitting a character
// (n ≤ 0: no limit).
func CutMessage(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// ActionName says which action an attempt ran.
type ActionName string

// The action names.
const (
	ActionNameMain  ActionName = "MainAction"
	ActionNameError ActionName = "ErrorAction"
)

var actionNames = []ActionName{ActionNameMain, ActionNameError}

// ParseActionName matches an action name case-insensitively.
func ParseActionName(s string) (ActionName, error) { return parseName("action name", s, actionNames) }

// UnmarshalJSON reads an action name case-insensitively.
func (n *ActionName) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, ParseActionName, n) }

// ExecutionStatus is the outcome of an attempt.
type ExecutionStatus string

// The outcomes. The original service never documented what Postponed meant.
const (
	ExecutionCompleted ExecutionStatus = "Completed"
	ExecutionFailed    ExecutionStatus = "Failed"
	ExecutionPostponed ExecutionStatus = "Postponed"
	// ExecutionSkipped (an extension) records occurrences that no planner ran in time and that
	// were skipped rather than replayed (docs/recurrence.md §7, the catch-up window).
	ExecutionSkipped ExecutionStatus = "Skipped"
)

var executionStatuses = []ExecutionStatus{ExecutionCompleted, ExecutionFailed, ExecutionPostponed, ExecutionSkipped}

// ParseExecutionStatus matches an outcome case-insensitively.
func ParseExecutionStatus(s string) (ExecutionStatus, error) {
	return parseName("execution status", s, executionStatuses)
}

// UnmarshalJSON reads an outcome case-insensitively.
func (s *ExecutionStatus) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, ParseExecutionStatus, s)
}
