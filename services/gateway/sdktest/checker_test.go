package sdktest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The swagger check fails answers that break the swagger: without this, a checker that checks
// nothing would pass the SDK test too.
func TestSwaggerCheckerCatchesBadAnswers(t *testing.T) {
	const base = "https://gateway.test"
	path := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/c/jobs?api-version=2016-03-01"
	for _, bad := range []string{
		`{"value": [], "nextLink": {"top": 2}}`,                   // nextLink an object, as the planners answer it
		`{"value": [{"properties": {"state": "Sleeping"}}]}`,      // a state outside the enum
		`{"value": [{"properties": {"startTime": "yesterday"}}]}`, // not a date-time
	} {
		c := newSwaggerChecker(t, base)
		req := httptest.NewRequest(http.MethodGet, base+path, nil)
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
		c.check(req, resp, []byte(bad))
		if len(c.errs) == 0 {
			t.Errorf("the checker let through %s", bad)
		}
		c.errs = nil // checked here, not at the end of the test
	}
	good := newSwaggerChecker(t, base)
	req := httptest.NewRequest(http.MethodGet, base+path, nil)
	good.check(req, &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}},
		[]byte(`{"value": [{"id": "x", "name": "c/j", "properties": {"state": "Enabled"}}], "nextLink": "`+base+path+`&$skiptoken=x"}`))
	if len(good.errs) != 0 || good.seen["Jobs_List"] != 1 {
		t.Errorf("a good answer refused: %v", good.errs)
	}
}
