package servicebus

import (
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// The application properties carrying the attempt's identity: the names of the HTTP headers
// (docs/nats-api.md, "What a target receives").
const (
	PropertyJobID             = "x-ms-scheduler-jobid"
	PropertyJobCollectionID   = "x-ms-scheduler-jobcollectionid"
	PropertyExpectedExecution = "x-ms-scheduler-expected-execution-time"
	PropertyExecutionTag      = "x-ms-scheduler-execution-tag"
	PropertyClientRequestID   = "x-ms-client-request-id"
)

// The application properties carrying the two brokered properties azservicebus has no field
// for. ForcePersistence steered the retired express entities and ViaPartitionKey transactions
// through a transfer queue; neither means anything to a single send today, but a job that
// sets them still shows them to its receivers rather than losing them silently.
const (
	PropertyForcePersistence = "ForcePersistence"
	PropertyViaPartitionKey  = "ViaPartitionKey"
)

// NewMessage builds the message of one attempt: the body, every brokered property in the
// message field of the same meaning, the custom properties, then the scheduler's identity
// properties, which win over custom ones of the same name. Without a messageId the message
// takes the attempt's client request id (a fresh GUID per attempt, as the original's
// BrokeredMessage got a fresh GUID).
func NewMessage(sb *job.ServiceBusMessage, m action.Meta) *azservicebus.Message {
	msg := &azservicebus.Message{Body: []byte(sb.Message), ApplicationProperties: map[string]any{}}
	if p := sb.BrokeredMessageProperties; p != nil {
		msg.ContentType = optional(p.ContentType)
		msg.CorrelationID = optional(p.CorrelationID)
		msg.Subject = optional(p.Label)
		msg.MessageID = optional(p.MessageID)
		msg.PartitionKey = optional(p.PartitionKey)
		msg.ReplyTo = optional(p.ReplyTo)
		msg.ReplyToSessionID = optional(p.ReplyToSessionID)
		msg.SessionID = optional(p.SessionID)
		msg.To = optional(p.To)
		if p.ScheduledEnqueueTimeUtc != nil {
			t := p.ScheduledEnqueueTimeUtc.UTC() // the name says UTC: a missing offset is UTC
			msg.ScheduledEnqueueTime = &t
		}
		if p.TimeToLive != nil {
			d := p.TimeToLive.Std()
			msg.TimeToLive = &d
		}
		if p.ForcePersistence {
			msg.ApplicationProperties[PropertyForcePersistence] = true
		}
		if p.ViaPartitionKey != "" {
			msg.ApplicationProperties[PropertyViaPartitionKey] = p.ViaPartitionKey
		}
	}
	if msg.MessageID == nil {
		msg.MessageID = optional(m.ClientRequestID)
	}
	for k, v := range sb.CustomMessageProperties {
		msg.ApplicationProperties[k] = v
	}
	for k, v := range map[string]string{
		PropertyJobID:             m.Job,
		PropertyJobCollectionID:   m.Collection,
		PropertyExpectedExecution: m.ExpectedExecutionTime(),
		PropertyExecutionTag:      m.ExecutionTag,
		PropertyClientRequestID:   m.ClientRequestID,
	} {
		if v != "" {
			msg.ApplicationProperties[k] = v
		}
	}
	return msg
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
