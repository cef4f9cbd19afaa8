package job

import (
	"log/slog"
	"maps"
)

// ServiceBusMessage is what the Service Bus queue and topic payloads share.
type ServiceBusMessage struct {
	Namespace                 string                     `json:"namespace"`
	Message                   string                     `json:"message,omitempty"`
	TransportType             TransportType              `json:"transportType,omitempty"`
	Authentication            *ServiceBusAuthentication  `json:"authentication,omitempty"`
	BrokeredMessageProperties *BrokeredMessageProperties `json:"brokeredMessageProperties,omitempty"`
	// CustomMessageProperties become the message's application properties.
	CustomMessageProperties map[string]string `json:"customMessageProperties,omitempty"`
}

// ServiceBusQueueMessage is the payload of a ServiceBusQueue action.
type ServiceBusQueueMessage struct {
	ServiceBusMessage
	QueueName string `json:"queueName"`
}

// ServiceBusTopicMessage is the payload of a ServiceBusTopic action.
type ServiceBusTopicMessage struct {
	ServiceBusMessage
	TopicPath string `json:"topicPath"`
}

// TransportType is the Service Bus client transport the original service offered; resched
// always speaks AMQP and keeps the value only to echo it.
type TransportType string

// The transport types.
const (
	TransportNotSpecified TransportType = "NotSpecified"
	TransportNetMessaging TransportType = "NetMessaging"
	TransportAMQP         TransportType = "AMQP"
)

var transportTypes = []TransportType{TransportNotSpecified, TransportNetMessaging, TransportAMQP}

// ParseTransportType matches a transport type case-insensitively.
func ParseTransportType(s string) (TransportType, error) {
	return parseName("transport type", s, transportTypes)
}

// UnmarshalJSON reads a transport type case-insensitively.
func (t *TransportType) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, ParseTransportType, t)
}

// ServiceBusAuthType says how a Service Bus action authenticates.
type ServiceBusAuthType string

// The Service Bus authentication types.
const (
	ServiceBusAuthNotSpecified    ServiceBusAuthType = "NotSpecified"
	ServiceBusAuthSharedAccessKey ServiceBusAuthType = "SharedAccessKey"
)

var serviceBusAuthTypes = []ServiceBusAuthType{ServiceBusAuthNotSpecified, ServiceBusAuthSharedAccessKey}

// ParseServiceBusAuthType matches a Service Bus authentication type case-insensitively.
func ParseServiceBusAuthType(s string) (ServiceBusAuthType, error) {
	return parseName("Service Bus authentication type", s, serviceBusAuthTypes)
}

// UnmarshalJSON reads a Service Bus authentication type case-insensitively.
func (t *ServiceBusAuthType) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, ParseServiceBusAuthType, t)
}

// ServiceBusAuthentication is a shared access key.
type ServiceBusAuthentication struct {
	Type       ServiceBusAuthType `json:"type,omitempty"`
	SASKeyName string             `json:"sasKeyName,omitempty"`
	SASKey     string             `json:"sasKey,omitempty"` // secret
}

// BrokeredMessageProperties are the system properties of the Service Bus message; each maps
// to the Service Bus message field of the same meaning.
type BrokeredMessageProperties struct {
	ContentType             string    `json:"contentType,omitempty"`
	CorrelationID           string    `json:"correlationId,omitempty"`
	ForcePersistence        bool      `json:"forcePersistence,omitempty"`
	Label                   string    `json:"label,omitempty"`
	MessageID               string    `json:"messageId,omitempty"`
	PartitionKey            string    `json:"partitionKey,omitempty"`
	ReplyTo                 string    `json:"replyTo,omitempty"`
	ReplyToSessionID        string    `json:"replyToSessionId,omitempty"`
	ScheduledEnqueueTimeUtc *DateTime `json:"scheduledEnqueueTimeUtc,omitempty"`
	SessionID               string    `json:"sessionId,omitempty"`
	TimeToLive              *Duration `json:"timeToLive,omitempty"`
	To                      string    `json:"to,omitempty"`
	ViaPartitionKey         string    `json:"viaPartitionKey,omitempty"`
}

// Redacted returns a deep copy without the shared access key.
func (m *ServiceBusMessage) Redacted() *ServiceBusMessage {
	if m == nil {
		return nil
	}
	c := *m
	if m.Authentication != nil {
		a := *m.Authentication
		a.SASKey = ""
		c.Authentication = &a
	}
	if m.BrokeredMessageProperties != nil {
		p := m.BrokeredMessageProperties.clone()
		c.BrokeredMessageProperties = &p
	}
	c.CustomMessageProperties = maps.Clone(m.CustomMessageProperties)
	return &c
}

func (p *BrokeredMessageProperties) clone() BrokeredMessageProperties {
	c := *p
	if p.ScheduledEnqueueTimeUtc != nil {
		t := *p.ScheduledEnqueueTimeUtc
		c.ScheduledEnqueueTimeUtc = &t
	}
	if p.TimeToLive != nil {
		d := *p.TimeToLive
		c.TimeToLive = &d
	}
	return c
}

// Redacted returns a deep copy without the shared access key.
func (m *ServiceBusQueueMessage) Redacted() *ServiceBusQueueMessage {
	if m == nil {
		return nil
	}
	return &ServiceBusQueueMessage{ServiceBusMessage: *m.ServiceBusMessage.Redacted(), QueueName: m.QueueName}
}

// Redacted returns a deep copy without the shared access key.
func (m *ServiceBusTopicMessage) Redacted() *ServiceBusTopicMessage {
	if m == nil {
		return nil
	}
	return &ServiceBusTopicMessage{ServiceBusMessage: *m.ServiceBusMessage.Redacted(), TopicPath: m.TopicPath}
}

// String returns the JSON of the redacted message.
func (m ServiceBusMessage) String() string { return redactedJSON(m.Redacted()) }

// LogValue logs the redacted message as JSON.
func (m ServiceBusMessage) LogValue() slog.Value { return jsonLogValue(m.Redacted()) }

// String returns the JSON of the redacted message.
func (m ServiceBusQueueMessage) String() string { return redactedJSON(m.Redacted()) }

// LogValue logs the redacted message as JSON.
func (m ServiceBusQueueMessage) LogValue() slog.Value { return jsonLogValue(m.Redacted()) }

// String returns the JSON of the redacted message.
func (m ServiceBusTopicMessage) String() string { return redactedJSON(m.Redacted()) }

// LogValue logs the redacted message as JSON.
func (m ServiceBusTopicMessage) LogValue() slog.Value { return jsonLogValue(m.Redacted()) }

// String hides the key.
func (a ServiceBusAuthentication) String() string {
	a.SASKey = ""
	return redactedJSON(a)
}
