package arm

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
)

// A collection's body is checked as the planners check it before the gateway reads it: its
// model once dropped a misspelt member, read an interval of 0 as the default 1, and answered
// a number given as text with Go's words.
func TestACollectionBodyIsCheckedBeforeItIsRead(t *testing.T) {
	srv, err := New(Config{NATS: planner{err: nats.ErrNoResponders}, Subjects: bus.NewSubjects(""), Auth: anyone{}})
	if err != nil {
		t.Fatal(err)
	}
	const path = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/c?api-version=2016-03-01"
	for _, c := range []struct{ body, target, says string }{
		{`{"location":"West US","properties":{"sku":{"name":"Standard"},"quotaa":{"maxJobCount":3}}}`, "properties.quotaa", "not a known property"},
		{`{"properties":{"quota":{"maxRecurrence":{"frequency":"Minute","interval":0}}}}`, "properties.quota.maxRecurrence.interval", "at least 1"},
		{`{"properties":{"quota":{"maxJobCount":"7"}}}`, "properties.quota.maxJobCount", "whole number"},
		{`{"properties":{"sku":{"name":"Gold"}}}`, "properties.sku.name", "Standard"},
		{`{"properties":`, "", "not valid JSON"},
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("PUT", path, strings.NewReader(c.body)))
		var body struct {
			Error struct {
				Code    string
				Details []errorDetail
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 400 || len(body.Error.Details) == 0 ||
			body.Error.Details[0].Target != c.target || !strings.Contains(body.Error.Details[0].Message, c.says) {
			t.Errorf("%s: %d %s, want 400 naming %q and saying %q", c.body, rec.Code, rec.Body, c.target, c.says)
		}
	}
	// A good body, as ARM clients send it (location, plan), goes on to the planners.
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("PUT", path, strings.NewReader(`{"location":"West US","properties":{"sku":{"name":"standard"},"quota":{"maxJobCount":10}}}`)))
	if rec.Code != 503 {
		t.Errorf("a good body: %d %s, want the planners' absence (503)", rec.Code, rec.Body)
	}
}
