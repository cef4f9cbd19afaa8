package bus

import "time"

// Status is the answer of <prefix>.api.status: the scheduler as the planner that answers sees
// it, for an operator (schedctl cluster status). A tenant's permissions name only its own
// collections' subjects, so this one is the operators'.
type Status struct {
	AnsweredBy string          `json:"answeredBy"` // the id of the planner that answered
	Version    string          `json:"version"`    // its build
	Time       time.Time       `json:"time"`       // its clock when it answered
	Planners   []PlannerStatus `json:"planners"`   // the live ones, by id
	Partitions int             `json:"partitions"`
	Unowned    []int           `json:"unownedPartitions"` // partitions no planner holds now
	// Leaving are the planners not live that still hold leases: standing down (cut off from
	// NATS, a clock astray) or stopped. Their partitions move once the leases run out.
	Leaving []LeaseHolder  `json:"leavingPlanners,omitempty"`
	Outages []OutageStatus `json:"outages"`          // intervals no planner ran, newest first
	DueNow  int64          `json:"dueNotDispatched"` // jobs due by now and not published yet
	// Collections counts every collection (an earlier release's planner leaves it out).
	Collections *int `json:"collections,omitempty"`
	// Changes are the collections' state changes and deletes under way, the oldest first.
	Changes []ChangeStatus `json:"collectionChanges,omitempty"`
	// Purges are the deleted jobs whose messages are still to be removed from the due stream.
	Purges   *PurgeStatus   `json:"jobPurges,omitempty"`
	Streams  []StreamStatus `json:"streams"`
	Problems []string       `json:"problems,omitempty"` // what could not be read
	// Warnings name the settings, of Redis or of the streams, by which jobs, occurrences or
	// results can be lost: what the planners' start logs, as it stands now.
	Warnings []string `json:"warnings,omitempty"`
}

// ChangeStatus is a collection's state change or delete under way: Change is the state it
// sets (Enabled, Disabled, Suspended) or "delete". One whose last step is StaleChangeAfter old
// was left by a planner that stopped, and another planner finishes it.
type ChangeStatus struct {
	Collection string    `json:"collection"`
	Change     string    `json:"change"`
	LastStep   time.Time `json:"lastStep"`
}

// PurgeStatus counts the deleted or disabled jobs whose messages are still to be removed from
// the due stream (their retries and error actions): a job's delete or disable removes them at
// once, so one StalePurgeAfter old was left by a planner that stopped, or NATS did not answer,
// and a planner removes them.
type PurgeStatus struct {
	Jobs   int64     `json:"jobs"`
	Oldest time.Time `json:"oldestDelete"`
}

// StaleChangeAfter is how long a collection's change may go without a step before a planner
// takes it up: its steps come milliseconds apart.
const StaleChangeAfter = 20 * time.Second

// StalePurgeAfter is how long a job's delete or disable may wait for the purge of its messages
// before a planner takes it up. The purge follows within milliseconds, and one made twice (its
// planner only slow) removes the same messages: a short wait leaves a waiting retry of a job
// whose planner died less time to run (retries are 15 s apart at least, by default).
const StalePurgeAfter = 5 * time.Second

// PlannerStatus is one live planner: its heartbeat holds until Until.
type PlannerStatus struct {
	ID         string    `json:"id"`
	Until      time.Time `json:"heartbeatUntil"`
	Partitions []int     `json:"partitions"`
}

// LeaseHolder is a planner and the partitions whose leases it holds.
type LeaseHolder struct {
	ID         string `json:"id"`
	Partitions []int  `json:"partitions"`
}

// OutageStatus is an interval in which no planner ran, and when it was recorded.
type OutageStatus struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Recorded time.Time `json:"recorded,omitzero"`
}

// StreamStatus is one of the scheduler's streams and its consumers.
type StreamStatus struct {
	Name      string           `json:"name"`
	Messages  uint64           `json:"messages"`
	Bytes     uint64           `json:"bytes"`
	Consumers []ConsumerStatus `json:"consumers"`
}

// ConsumerStatus is a consumer of a stream: the planners' or the workers'.
type ConsumerStatus struct {
	Name        string `json:"name"`
	Pending     uint64 `json:"pending"`      // not delivered yet
	InFlight    int    `json:"inFlight"`     // delivered, not acknowledged yet
	Waiting     int    `json:"waitingPulls"` // pull requests waiting for messages: idle readers
	Redelivered int    `json:"redelivered"`  // delivered more than once, not acknowledged yet
}
