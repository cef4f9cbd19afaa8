package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamOptions are the deployment choices for the streams. They apply when a stream is
// created; an existing stream keeps what an operator has set since (nats stream edit).
type StreamOptions struct {
	Replicas        int           // 1 for a single server; 3 for a JetStream cluster
	DuplicateWindow time.Duration // how long a re-published due occurrence or result is dropped
	PlacementTags   []string      // servers tagged so (server_tags) hold the streams; none: any
}

// StreamConfigs are the three streams as they are created.
func StreamConfigs(s Subjects, o StreamOptions) []jetstream.StreamConfig {
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 10 * time.Minute
	}
	var placement *jetstream.Placement
	if len(o.PlacementTags) > 0 {
		placement = &jetstream.Placement{Tags: o.PlacementTags}
	}
	return []jetstream.StreamConfig{
		{
			// Definitions wait here while no planner runs; a planner acknowledges each once stored.
			Name: s.IntakeStream(), Subjects: []string{s.Prefix + ".jobs.>"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: o.Replicas, Placement: placement,
			Description: "job definitions published by clients, consumed by the planners",
		},
		{
			Name: s.DueStream(), Subjects: []string{s.Prefix + ".due.>"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: o.Replicas, Placement: placement,
			Duplicates:  o.DuplicateWindow,
			Description: "due occurrences published by the planners, consumed by the workers",
		},
		{
			Name: s.ResultsStream(), Subjects: []string{s.Prefix + ".results.>"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: o.Replicas, Placement: placement,
			Duplicates:  o.DuplicateWindow,
			Description: "attempt results published by the workers, consumed by the planners",
		},
	}
}

// StreamNote is what EnsureStreams found an existing stream to differ in from the settings,
// and left as it is.
type StreamNote struct {
	Stream, Setting string
	Has, Wants      string
	Changed         bool // EnsureStreams set what the stream wants
}

// EnsureStreams creates the streams that are missing. An existing stream is updated only
// where it breaks the contract: its subjects, and a discard policy that drops messages unread
// at a size or count limit (made to refuse new ones instead). Its limits, replicas, duplicate window and
// placement are the operator's once it exists, and each that differs from the settings is
// returned as a note. Every planner calls it at start, and a worker when a stream is missing,
// so whichever starts first creates them.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, s Subjects, o StreamOptions) ([]StreamNote, error) {
	var notes []StreamNote
	for _, want := range StreamConfigs(s, o) {
		st, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			created, err := js.CreateStream(ctx, want)
			switch {
			case err == nil:
				notes = append(notes, alone(created.CachedInfo())...)
			case !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
				return notes, fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			continue
		}
		if err != nil {
			return notes, fmt.Errorf("stream %s: %w", want.Name, err)
		}
		has := st.CachedInfo().Config
		if !slices.Equal(has.Subjects, want.Subjects) {
			has.Subjects = want.Subjects
			if _, err := js.UpdateStream(ctx, has); err != nil {
				return notes, fmt.Errorf("update the subjects of stream %s: %w", want.Name, err)
			}
		}
		if n, ok := discardsOld(has); ok {
			// Noted, not fatal, when the update is refused (a user not allowed it): the
			// services run as before, and the operator learns what to set.
			fixed := has
			fixed.Discard = jetstream.DiscardNew
			if _, err := js.UpdateStream(ctx, fixed); err != nil {
				n.Wants += fmt.Sprintf(" (nats stream edit %s --discard new; setting it failed: %v)", want.Name, err)
			} else {
				n.Changed = true
			}
			notes = append(notes, n)
		}
		notes = append(notes, dropsUnread(want.Name, has)...)
		note := func(setting string, has, wants any) {
			if fmt.Sprint(has) != fmt.Sprint(wants) {
				notes = append(notes, StreamNote{Stream: want.Name, Setting: setting, Has: fmt.Sprint(has), Wants: fmt.Sprint(wants)})
			}
		}
		note("replicas", has.Replicas, want.Replicas)
		if want.Replicas == 1 {
			notes = append(notes, alone(st.CachedInfo())...)
		}
		if want.Duplicates > 0 {
			note("duplicate window", has.Duplicates, want.Duplicates)
		}
		note("placement tags", placementTags(has.Placement), placementTags(want.Placement))
		if least := smallestLimit(s, want.Name); has.MaxMsgSize > 0 && has.MaxMsgSize < least {
			notes = append(notes, StreamNote{Stream: want.Name, Setting: "max message size", Has: fmt.Sprint(has.MaxMsgSize),
				Wants: fmt.Sprintf("none, or at least %d bytes: larger messages are refused", least)})
		}
	}
	return notes, nil
}

// StreamRisks notes the settings of a stream by which what it holds can be lost: a discard
// policy of old at a size or count limit (EnsureStreams changes it when it may), the limits
// that remove messages unread whatever the policy (dropsUnread), and one replica on a NATS
// cluster. `schedctl cluster status` shows them, as the planners' start logs them.
func StreamRisks(info *jetstream.StreamInfo) []StreamNote {
	if info == nil {
		return nil
	}
	var notes []StreamNote
	if n, ok := discardsOld(info.Config); ok {
		notes = append(notes, n)
	}
	notes = append(notes, dropsUnread(info.Config.Name, info.Config)...)
	return append(notes, alone(info)...)
}

// discardsOld notes a stream that removes its oldest messages, read or not, at its size or
// count limit.
func discardsOld(has jetstream.StreamConfig) (StreamNote, bool) {
	if (has.MaxBytes <= 0 && has.MaxMsgs <= 0) || has.Discard != jetstream.DiscardOld {
		return StreamNote{}, false
	}
	return StreamNote{Stream: has.Name, Setting: "discard policy", Has: "old, at its max bytes or messages",
		Wants: "new: a full stream refuses what is published, sent again later, rather than drop what waits unread"}, true
}

// alone notes a stream of one replica on a NATS cluster: the replicas setting left at its
// single-server default, so the loss of the one server that holds the stream stops the
// schedule until it is back, or loses what the stream holds if its disk goes with it.
func alone(info *jetstream.StreamInfo) []StreamNote {
	if info == nil || info.Config.Replicas != 1 || info.Cluster == nil || info.Cluster.Name == "" {
		return nil
	}
	return []StreamNote{{Stream: info.Config.Name, Setting: "replicas", Has: "1, on NATS cluster " + info.Cluster.Name,
		Wants: "3 (STREAM_REPLICAS=3 before the streams are created, or nats stream edit --replicas 3): " +
			"the loss of the server that holds it stops the schedule, or loses what it holds"}}
}

// dropsUnread notes the limits by which a stream removes messages nobody has read, which
// EnsureStreams cannot turn into refusals: an age, and a count per subject (a job's due
// occurrences, its retries and error actions, share a subject). An occurrence, a result or a
// definition removed so is lost without a record. A size or count limit of the whole stream
// is kept, its discard policy made new (EnsureStreams): an operator capping the store, as
// operations.md asks them to size it, lost the oldest occurrences unread before
// (TestACappedDueStreamRefusesRatherThanDrops, services/planner).
func dropsUnread(name string, has jetstream.StreamConfig) []StreamNote {
	var notes []StreamNote
	if has.MaxAge > 0 {
		notes = append(notes, StreamNote{Stream: name, Setting: "max age", Has: has.MaxAge.String(),
			Wants: "none: messages older than it are removed unread, and lost"})
	}
	if has.MaxMsgsPerSubject > 0 {
		notes = append(notes, StreamNote{Stream: name, Setting: "max messages per subject", Has: fmt.Sprint(has.MaxMsgsPerSubject),
			Wants: "none: a subject's older messages are removed unread, and lost"})
	}
	return notes
}

// MaxDefinition is jobschema.MaxJobSize, the largest definition a planner accepts (a test
// holds them equal): bus does not import jobschema, whose schema every importer would compile
// at start, the workers' and the gateway's too.
const MaxDefinition = 16 << 10

// smallestLimit is the least largest-message setting a stream needs. On the intake stream, a
// definition of the largest size allowed (MaxDefinition) with its envelope; on
// the due stream, its action with the secrets sealed (the ciphertext in base64: a third more);
// on the results stream, one result (its message at most 8 KiB, up to six times that once
// escaped in JSON, though a few KiB in practice).
// Below it, a planner parks the jobs whose occurrences are refused, and a worker records results
// with their messages cut.
func smallestLimit(s Subjects, stream string) int32 {
	switch stream {
	case s.DueStream():
		return 24 << 10
	case s.ResultsStream():
		return 64 << 10
	}
	return MaxDefinition + 1<<10
}

func placementTags(p *jetstream.Placement) []string {
	if p == nil {
		return nil
	}
	return p.Tags
}

// IntakeConsumerConfig is the planners' shared consumer of definitions. Many are in flight at
// once across the planners: their order is kept by their stream sequences (package intake).
func IntakeConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: IntakeConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 8192, AckWait: 30 * time.Second,
	}
}

// ResultsAckWait is how long a result handed to a planner may go unsettled before the server
// hands it to another: the lag of history after a planner that hung with results in hand (a
// frozen host, a link that drops packets). It was 30 s; a planner settles a result within its
// handling time-out, which stays below it (package results).
const ResultsAckWait = 10 * time.Second

// ResultsConsumerConfig is the planners' shared consumer of results.
func ResultsConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: ResultsConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 4096, AckWait: ResultsAckWait,
	}
}

// WorkerConsumerConfig is the workers' shared consumer of due occurrences. ackWait bounds how
// long a worker killed mid-delivery holds an occurrence before another worker gets it.
func WorkerConsumerConfig(ackWait time.Duration, maxAckPending int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: WorkerConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: ackWait, MaxAckPending: maxAckPending, MaxDeliver: -1,
	}
}

// SplitTags reads a comma-separated list of server tags; empty gives none.
func SplitTags(list string) []string {
	var tags []string
	for _, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

// Full says a publish was refused because JetStream has no room for it: the server's
// storage (max_file_store), the account's limit, or the stream's own (its max bytes or
// messages, with the discard policy EnsureStreams sets). Unlike a message too large, the same
// message is stored once room is made.
func Full(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case jsErrInsufficientResources, jsErrAccountResourcesExceeded:
		return true
	case jsErrStreamStoreFailed: // also a message too large for the file store, not a limit
		return strings.HasPrefix(api.Description, "maximum")
	}
	return false
}

// JetStream's codes for a full store, which nats.go does not name (nats-server's
// JSInsufficientResourcesErr, JSAccountResourcesExceededErr, and JSStreamStoreFailedF with
// "maximum bytes exceeded" or "maximum messages exceeded").
const (
	jsErrInsufficientResources    jetstream.ErrorCode = 10023
	jsErrAccountResourcesExceeded jetstream.ErrorCode = 10002
	jsErrStreamStoreFailed        jetstream.ErrorCode = 10077
)

// TooLarge says a publish was refused for the message's size: over the stream's largest
// message (JetStream's answer) or the server's max_payload (the client's check before it
// sends). Unlike a fault on the way (no leader, a full stream, a lost connection), the same
// message is refused again however often it is sent.
func TooLarge(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) ||
		errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}
