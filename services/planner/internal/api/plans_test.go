package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// A collection's plan (sku) brings the original service's quotas and the Free plan's rules.
func TestPlans(t *testing.T) {
	e := newEnv(t)
	hourlyNoAuth := `{"startTime": "2024-01-02T00:00:00Z", "action": {"type": "Http", "request": {"uri": "http://example.com/", "method": "GET"}},
	  "recurrence": {"frequency": "Hour", "interval": 1}}`
	e.putCollection(t, "free", `{"sku": {"name": "Free"}}`)
	var coll struct {
		Properties struct {
			Quota struct {
				MaxJobCount   int `json:"maxJobCount"`
				MaxRecurrence struct {
					Frequency string `json:"frequency"`
					Interval  int    `json:"interval"`
				} `json:"maxRecurrence"`
			} `json:"quota"`
		} `json:"properties"`
	}
	e.ok(t, "collections.get.free", "", &coll)
	if q := coll.Properties.Quota; q.MaxJobCount != 5 || q.MaxRecurrence.Frequency != "Hour" || q.MaxRecurrence.Interval != 1 {
		t.Errorf("Free quota %+v, want 5 jobs, hourly", q)
	}
	minutely := strings.Replace(hourlyNoAuth, `"Hour"`, `"Minute"`, 1)
	e.fail(t, "jobs.put.free.m", minutely, "409", "Conflict")
	e.fail(t, "jobs.put.free.auth", hourly, "409", "Conflict") // Basic authentication
	quick := strings.Replace(hourlyNoAuth, `"method": "GET"}`, `"method": "GET"}, "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30S"}`, 1)
	if a := e.fail(t, "jobs.put.free.retry", quick, "400", "BadRequest"); !strings.Contains(a.Error.Message, "1 hour") {
		t.Errorf("retry refusal: %s", a.Error.Message)
	}
	for i := range 5 {
		e.ok(t, fmt.Sprintf("jobs.put.free.j%d", i), hourlyNoAuth, nil)
	}
	e.fail(t, "jobs.put.free.j5", hourlyNoAuth, "409", "Conflict")

	a := e.fail(t, "collections.put.big", `{"properties": {"sku": {"name": "Free"}, "quota": {"maxJobCount": 6}}}`, "400", "BadRequest")
	if !strings.Contains(a.Error.Message, "cannot be set higher than '5'") {
		t.Errorf("quota refusal: %s", a.Error.Message)
	}
	e.fail(t, "collections.put.fast", `{"properties": {"sku": {"name": "Standard"}, "quota": {"maxRecurrence": {"frequency": "Minute", "interval": 1}, "maxJobCount": 51}}}`, "400", "BadRequest")

	// Standard: 50 jobs by default; a downgrade to Free with more than 5 jobs is refused.
	e.putCollection(t, "std", `{"sku": {"name": "Standard"}}`)
	for i := range 6 {
		e.ok(t, fmt.Sprintf("jobs.put.std.j%d", i), hourlyNoAuth, nil)
	}
	if a := e.fail(t, "collections.put.std", `{"properties": {"sku": {"name": "Free"}}}`, "409", "Conflict"); !strings.Contains(a.Error.Message, "cannot become Free") {
		t.Errorf("downgrade refusal: %s", a.Error.Message)
	}
	// A collection without a plan keeps the quota it says: none.
	e.putCollection(t, "none", `{}`)
	e.ok(t, "jobs.put.none.m", minutely, nil)
}
