package job

import "log/slog"

// StorageQueueMessage is the payload of a StorageQueue action. The worker enqueues Message
// wrapped in the XML envelope the original service wrote (reference, section 6.10).
type StorageQueueMessage struct {
	StorageAccount string `json:"storageAccount"`
	QueueName      string `json:"queueName"`
	SASToken       string `json:"sasToken,omitempty"` // secret
	Message        string `json:"message"`
}

// Redacted returns a copy without the SAS token.
func (m *StorageQueueMessage) Redacted() *StorageQueueMessage {
	if m == nil {
		return nil
	}
	c := *m
	c.SASToken = ""
	return &c
}

// String returns the JSON of the redacted message.
func (m StorageQueueMessage) String() string { return redactedJSON(m.Redacted()) }

// LogValue logs the redacted message as JSON.
func (m StorageQueueMessage) LogValue() slog.Value { return jsonLogValue(m.Redacted()) }
