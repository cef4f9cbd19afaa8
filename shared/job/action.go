package job

import "log/slog"

// ActionType says which payload of an action is delivered.
type ActionType string

// The action types. Http and Https behave the same; the URI decides the scheme.
const (
	ActionHTTP            ActionType = "Http"
	ActionHTTPS           ActionType = "Https"
	ActionStorageQueue    ActionType = "StorageQueue"
	ActionServiceBusQueue ActionType = "ServiceBusQueue"
	ActionServiceBusTopic ActionType = "ServiceBusTopic"
)

var actionTypes = []ActionType{ActionHTTP, ActionHTTPS, ActionStorageQueue, ActionServiceBusQueue, ActionServiceBusTopic}

// ParseActionType matches an action type case-insensitively.
func ParseActionType(s string) (ActionType, error) {
	return parseName("action type", s, actionTypes)
}

// UnmarshalJSON reads an action type case-insensitively.
func (t *ActionType) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, ParseActionType, t) }

// IsHTTP reports whether the action sends an HTTP request.
func (t ActionType) IsHTTP() bool { return t == ActionHTTP || t == ActionHTTPS }

// ActionSpec is what both an action and its error action hold: one payload, chosen by Type,
// and how to retry it. The worker delivers an ActionSpec without caring which of the two it is.
type ActionSpec struct {
	Type                   ActionType              `json:"type"`
	Request                *HTTPRequest            `json:"request,omitempty"`                // Http, Https
	QueueMessage           *StorageQueueMessage    `json:"queueMessage,omitempty"`           // StorageQueue
	ServiceBusQueueMessage *ServiceBusQueueMessage `json:"serviceBusQueueMessage,omitempty"` // ServiceBusQueue
	ServiceBusTopicMessage *ServiceBusTopicMessage `json:"serviceBusTopicMessage,omitempty"` // ServiceBusTopic
	RetryPolicy            *RetryPolicy            `json:"retryPolicy,omitempty"`            // absent: the defaults
}

// Action is the job's main action (Azure's JobAction).
type Action struct {
	ActionSpec
	// ErrorAction runs once the main action has failed through all its retries.
	ErrorAction *ErrorAction `json:"errorAction,omitempty"`
}

// ErrorAction is the action run after the main action failed (Azure's JobErrorAction): the
// same fields without a further error action.
type ErrorAction struct {
	ActionSpec
}

// Redacted returns a deep copy with every secret cleared.
func (s *ActionSpec) Redacted() *ActionSpec {
	if s == nil {
		return nil
	}
	c := *s
	c.Request = s.Request.Redacted()
	c.QueueMessage = s.QueueMessage.Redacted()
	c.ServiceBusQueueMessage = s.ServiceBusQueueMessage.Redacted()
	c.ServiceBusTopicMessage = s.ServiceBusTopicMessage.Redacted()
	c.RetryPolicy = s.RetryPolicy.clone()
	return &c
}

// Redacted returns a deep copy with every secret cleared.
func (a *Action) Redacted() *Action {
	if a == nil {
		return nil
	}
	return &Action{ActionSpec: *a.ActionSpec.Redacted(), ErrorAction: a.ErrorAction.Redacted()}
}

// Redacted returns a deep copy with every secret cleared.
func (e *ErrorAction) Redacted() *ErrorAction {
	if e == nil {
		return nil
	}
	return &ErrorAction{ActionSpec: *e.ActionSpec.Redacted()}
}

// String returns the JSON of the redacted action.
func (s ActionSpec) String() string { return redactedJSON(s.Redacted()) }

// LogValue logs the redacted action as JSON.
func (s ActionSpec) LogValue() slog.Value { return jsonLogValue(s.Redacted()) }

// String returns the JSON of the redacted action.
func (a Action) String() string { return redactedJSON(a.Redacted()) }

// LogValue logs the redacted action as JSON.
func (a Action) LogValue() slog.Value { return jsonLogValue(a.Redacted()) }

// String returns the JSON of the redacted error action.
func (e ErrorAction) String() string { return redactedJSON(e.Redacted()) }

// LogValue logs the redacted error action as JSON.
func (e ErrorAction) LogValue() slog.Value { return jsonLogValue(e.Redacted()) }
