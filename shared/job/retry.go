package job

import "time"

// The retry defaults of the original service, used when a policy or one of its fields is
// absent (reference, section 6.5). They are applied by methods, not written into the stored
// JSON, so that what a client sent is what it gets back.
const (
	DefaultRetryCount    = 4
	DefaultRetryInterval = 30 * time.Second
)

// RetryType says whether a failed attempt is retried.
type RetryType string

// The retry types.
const (
	RetryNone  RetryType = "None"
	RetryFixed RetryType = "Fixed"
)

var retryTypes = []RetryType{RetryNone, RetryFixed}

// ParseRetryType matches a retry type case-insensitively.
func ParseRetryType(s string) (RetryType, error) { return parseName("retry type", s, retryTypes) }

// UnmarshalJSON reads a retry type case-insensitively.
func (t *RetryType) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, ParseRetryType, t) }

// RetryPolicy says how often, and how far apart, a failed action is tried again. The pointer
// fields tell "absent" (take the default) from an explicit zero.
type RetryPolicy struct {
	RetryType     RetryType `json:"retryType,omitempty"`
	RetryInterval *Duration `json:"retryInterval,omitempty"`
	RetryCount    *int      `json:"retryCount,omitempty"`
}

// Kind returns the retry type in force: Fixed when the policy or its type is absent.
func (p *RetryPolicy) Kind() RetryType {
	if p == nil || p.RetryType == "" {
		return RetryFixed
	}
	return p.RetryType
}

// Count returns how many retries follow a failed first attempt: none with None, else the
// given count or the default 4.
func (p *RetryPolicy) Count() int {
	switch {
	case p.Kind() == RetryNone:
		return 0
	case p == nil || p.RetryCount == nil:
		return DefaultRetryCount
	}
	return *p.RetryCount
}

// Interval returns the wait between attempts: the given interval or the default 30 s
// (meaningless, and still answered, with None).
func (p *RetryPolicy) Interval() time.Duration {
	if p == nil || p.RetryInterval == nil {
		return DefaultRetryInterval
	}
	return p.RetryInterval.Std()
}

func (p *RetryPolicy) clone() *RetryPolicy {
	if p == nil {
		return nil
	}
	c := *p
	if p.RetryInterval != nil {
		d := *p.RetryInterval
		c.RetryInterval = &d
	}
	if p.RetryCount != nil {
		n := *p.RetryCount
		c.RetryCount = &n
	}
	return &c
}
