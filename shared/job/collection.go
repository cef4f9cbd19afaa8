package job

// Collection is a job collection resource: a named group of jobs with quotas and a state
// that pauses all of them at once.
type Collection struct {
	ID         string               `json:"id,omitempty"`   // read-only
	Type       string               `json:"type,omitempty"` // read-only
	Name       string               `json:"name,omitempty"`
	Location   string               `json:"location,omitempty"`
	Tags       map[string]string    `json:"tags,omitempty"`
	Properties CollectionProperties `json:"properties"`
	// JobCount is how many jobs the collection holds (read-only; an extension the planners
	// answer, ignored in requests).
	JobCount *int `json:"jobCount,omitempty"`
}

// CollectionProperties are the plan, state and quotas of a collection.
type CollectionProperties struct {
	Sku   *Sku            `json:"sku,omitempty"`
	State CollectionState `json:"state,omitempty"` // absent: Enabled
	Quota *Quota          `json:"quota,omitempty"`
}

// Sku names the plan of a collection. resched has no billing; the plan is kept so that
// definitions round-trip and can pick default quotas.
type Sku struct {
	Name SkuName `json:"name,omitempty"`
}

// SkuName is a plan of the original service.
type SkuName string

// The plans.
const (
	SkuStandard   SkuName = "Standard"
	SkuFree       SkuName = "Free"
	SkuP10Premium SkuName = "P10Premium"
	SkuP20Premium SkuName = "P20Premium"
)

var skuNames = []SkuName{SkuStandard, SkuFree, SkuP10Premium, SkuP20Premium}

// ParseSkuName matches a plan name case-insensitively.
func ParseSkuName(s string) (SkuName, error) { return parseName("sku name", s, skuNames) }

// UnmarshalJSON reads a plan name case-insensitively.
func (n *SkuName) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, ParseSkuName, n) }

// CollectionState is the state of a collection; Disabled pauses every job in it.
type CollectionState string

// The collection states.
const (
	CollectionEnabled   CollectionState = "Enabled"
	CollectionDisabled  CollectionState = "Disabled"
	CollectionSuspended CollectionState = "Suspended"
	CollectionDeleted   CollectionState = "Deleted"
)

var collectionStates = []CollectionState{CollectionEnabled, CollectionDisabled, CollectionSuspended, CollectionDeleted}

// Pauses reports whether a collection in this state holds its jobs back: Disabled, and
// Suspended, which the original service set on a suspended subscription and which a client may
// set too. The planners' scripts (advance, put_jobs, set_collection_state) say the same.
func (s CollectionState) Pauses() bool {
	return s == CollectionDisabled || s == CollectionSuspended
}

// ParseCollectionState matches a collection state case-insensitively.
func ParseCollectionState(s string) (CollectionState, error) {
	return parseName("collection state", s, collectionStates)
}

// UnmarshalJSON reads a collection state case-insensitively.
func (s *CollectionState) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, ParseCollectionState, s)
}

// Quota limits a collection: how many jobs it holds and how often they may recur.
type Quota struct {
	MaxJobCount int `json:"maxJobCount,omitempty"`
	// MaxJobOccurrence had no documented effect in the original service; kept to round-trip.
	MaxJobOccurrence int `json:"maxJobOccurrence,omitempty"`
	// MaxRecurrence is the shortest recurrence (frequency × interval) a job may use.
	MaxRecurrence *MaxRecurrence `json:"maxRecurrence,omitempty"`
}

// MaxRecurrence is a frequency and interval, e.g. every 1 Minute.
type MaxRecurrence struct {
	Frequency Frequency `json:"frequency"`
	Interval  int       `json:"interval,omitempty"` // 0 means 1
}
