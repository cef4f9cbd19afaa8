package storagequeue

import (
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/worker/internal/action"
)

// The reference's sample envelope (section 6.10), CRLF line breaks as .NET wrote them.
const sampleEnvelope = `<?xml version="1.0" encoding="utf-16"?>
<StorageQueueMessage xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <ExecutionTag>e927cf76d24da9625608248ce654cfa7</ExecutionTag>
  <ClientRequestId>3c4b84e2-aee5-43ac-913e-c05c8827ac41</ClientRequestId>
  <ExpectedExecutionTime>2015-09-10T00:00:00</ExpectedExecutionTime>
  <SchedulerJobId>rm-msol-membership</SchedulerJobId>
  <SchedulerJobCollectionId>rmmsol</SchedulerJobCollectionId>
  <Region>West Europe</Region>
  <Message>membership</Message>
</StorageQueueMessage>`

func sampleMeta() action.Meta {
	return action.Meta{Collection: "rmmsol", Job: "rm-msol-membership",
		Scheduled:    time.Date(2015, 9, 10, 2, 0, 0, 0, time.FixedZone("CEST", 2*3600)), // 00:00 UTC
		ExecutionTag: "e927cf76d24da9625608248ce654cfa7", ClientRequestID: "3c4b84e2-aee5-43ac-913e-c05c8827ac41",
		Region: "West Europe"}
}

func TestEnvelopeMatchesTheOriginal(t *testing.T) {
	got, err := Envelope("membership", sampleMeta())
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(sampleEnvelope, "\n", "\r\n"); got != want {
		t.Errorf("envelope:\n%q\nwant\n%q", got, want)
	}
}

func TestEnvelopeEscaping(t *testing.T) {
	tests := []struct {
		name, message, want string
	}{
		{"markup", `<a href="x">Tom & Jerry's</a>`, `&lt;a href="x"&gt;Tom &amp; Jerry's&lt;/a&gt;`},
		{"line breaks", "one\r\ntwo\nthree\tfour", "one&#xD;\ntwo\nthree\tfour"},
		{"already escaped", "&amp;", "&amp;amp;"},
		{"unicode", "日本 ✓ 😀 \uFFFD", "日本 ✓ 😀 \uFFFD"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Envelope(tt.message, sampleMeta())
			if err != nil {
				t.Fatal(err)
			}
			if want := "<Message>" + tt.want + "</Message>"; !strings.Contains(got, want) {
				t.Errorf("envelope %q does not contain %q", got, want)
			}
		})
	}
}

func TestEnvelopeEscapesMetadataToo(t *testing.T) {
	m := sampleMeta()
	m.Region = "A&B <north>"
	got, err := Envelope("x", m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "<Region>A&amp;B &lt;north&gt;</Region>") {
		t.Errorf("region not escaped: %q", got)
	}
}

func TestEnvelopeRefusesWhatXMLCannotCarry(t *testing.T) {
	for name, message := range map[string]string{
		"control character": "bell\x07",
		"NUL":               "a\x00b",
		"invalid UTF-8":     "a\xffb",
		"noncharacter":      "a\uFFFEb",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Envelope(message, sampleMeta()); err == nil || !strings.Contains(err.Error(), "Message") {
				t.Errorf("Envelope(%q) err = %v, want an error naming Message", message, err)
			}
		})
	}
}

// A run-now's millisecond is kept, still without a zone designator.
func TestEnvelopeKeepsMilliseconds(t *testing.T) {
	m := sampleMeta()
	m.Scheduled = time.Date(2015, 9, 10, 0, 0, 0, 125*int(time.Millisecond), time.UTC)
	got, err := Envelope("membership", m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "<ExpectedExecutionTime>2015-09-10T00:00:00.125</ExpectedExecutionTime>") {
		t.Errorf("envelope:\n%s", got)
	}
}
