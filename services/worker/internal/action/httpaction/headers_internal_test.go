package httpaction

import (
	"net/textproto"
	"testing"
)

// The headers set directly must be in the form the header map looks them up by.
func TestCanonicalHeaderNames(t *testing.T) {
	for name, canonical := range map[string]string{
		HeaderJobID: canonicalJobID, HeaderJobCollectionID: canonicalJobCollectionID, HeaderExpectedExecution: canonicalExpectedExecution,
		HeaderExecutionTag: canonicalExecutionTag, HeaderClientRequestID: canonicalClientRequestID, "user-agent": "User-Agent",
	} {
		if got := textproto.CanonicalMIMEHeaderKey(name); got != canonical {
			t.Errorf("%s is %s in canonical form, not %s", name, got, canonical)
		}
	}
}
