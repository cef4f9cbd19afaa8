package storagequeue

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/resched/resched/services/worker/internal/action"
)

// The envelope is text, not encoding/xml output: it must match what the original service's
// .NET XmlSerializer wrote (reference, section 6.10) down to the declaration claiming utf-16,
// the namespace declarations, the element order, two-space indentation and CRLF line breaks.
const envelopeFormat = "<?xml version=\"1.0\" encoding=\"utf-16\"?>\r\n" +
	"<StorageQueueMessage xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">\r\n" +
	"  <ExecutionTag>%s</ExecutionTag>\r\n" +
	"  <ClientRequestId>%s</ClientRequestId>\r\n" +
	"  <ExpectedExecutionTime>%s</ExpectedExecutionTime>\r\n" +
	"  <SchedulerJobId>%s</SchedulerJobId>\r\n" +
	"  <SchedulerJobCollectionId>%s</SchedulerJobCollectionId>\r\n" +
	"  <Region>%s</Region>\r\n" +
	"  <Message>%s</Message>\r\n" +
	"</StorageQueueMessage>"

// expectedTimeLayout has no zone designator, as the original wrote it (UTC implied); milliseconds
// only when the time has them, as action.Meta.ExpectedExecutionTime.
const expectedTimeLayout = "2006-01-02T15:04:05.999"

// Envelope wraps the user's message with the attempt's metadata. It fails when a value holds a
// character XML 1.0 cannot carry (the original's serializer refused those too).
func Envelope(message string, m action.Meta) (string, error) {
	fields := []struct{ name, value string }{
		{"ExecutionTag", m.ExecutionTag},
		{"ClientRequestId", m.ClientRequestID},
		{"ExpectedExecutionTime", m.Scheduled.UTC().Format(expectedTimeLayout)},
		{"SchedulerJobId", m.Job},
		{"SchedulerJobCollectionId", m.Collection},
		{"Region", m.Region},
		{"Message", message},
	}
	escaped := make([]any, len(fields))
	for i, f := range fields {
		s, err := escapeText(f.value)
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.name, err)
		}
		escaped[i] = s
	}
	return fmt.Sprintf(envelopeFormat, escaped...), nil
}

// escapeText escapes element text the way XmlSerializer does (&, <, >), plus carriage returns,
// which an XML parser would otherwise normalise away.
func escapeText(s string) (string, error) {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return "", fmt.Errorf("invalid UTF-8 at byte %d", i)
		case !xmlChar(r):
			return "", fmt.Errorf("character %U at byte %d cannot be carried in XML", r, i)
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '\r':
			b.WriteString("&#xD;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// xmlChar reports whether r is in XML 1.0's Char production.
func xmlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' ||
		(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}
