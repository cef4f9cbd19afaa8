package jobschema

import (
	"encoding/json"
	"testing"

	"github.com/resched/resched/schemas"
	"github.com/resched/resched/shared/job"
)

func TestDecodeCollection(t *testing.T) {
	props := `{"SKU":{"name":"standard"},"state":"SUSPENDED",
		"quota":{"maxJobCount":50,"maxRecurrence":{"Frequency":"minute","interval":1}}}`
	v := newValidator(t)
	for form, in := range map[string]string{
		"bare":    props,
		"wrapped": `{"name":"demo","location":"South Central US","tags":{"Department":"Marketing"},"properties":` + props + `}`,
	} {
		c, err := v.DecodeCollection([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		p := c.Properties
		if p.Sku.Name != job.SkuStandard || p.State != job.CollectionSuspended || p.Quota.MaxJobCount != 50 ||
			p.Quota.MaxRecurrence.Frequency != job.Minute || p.Quota.MaxRecurrence.Interval != 1 {
			t.Errorf("%s: decoded %+v", form, p)
		}
		if form == "wrapped" {
			out, _ := json.Marshal(c.Tags)
			if string(out) != `{"Department":"Marketing"}` {
				t.Errorf("tags changed: %s", out)
			}
		}
	}
}

func TestDecodeCollectionRejects(t *testing.T) {
	tests := []struct{ name, in, path, fragment string }{
		{"unknown sku", `{"sku":{"name":"Gold"}}`, "properties.sku.name", "must be one of Standard, Free, P10Premium, P20Premium"},
		{"state Deleted", `{"state":"deleted"}`, "properties.state", "cannot be set to Deleted"},
		{"maxJobCount 0", `{"quota":{"maxJobCount":0}}`, "properties.quota.maxJobCount", "must be at least 1"},
		{"maxJobCount string", `{"quota":{"maxJobCount":"5"}}`, "properties.quota.maxJobCount", "must be a whole number, not a string"},
		{"maxRecurrence without frequency", `{"quota":{"maxRecurrence":{"interval":1}}}`, "properties.quota.maxRecurrence.frequency", "is required"},
		{"bad name", `{"name":"no spaces","properties":{}}`, "name", "must be 1 to 64 letters, digits, - or _"},
		{"unknown member", `{"properties":{},"owner":"me"}`, "owner", "is not a known property"},
		{"tag not a string", `{"tags":{"n":1}}`, `tags.n`, "must be a string"},
	}
	v := newValidator(t)
	for _, tt := range tests {
		c, err := v.DecodeCollection([]byte(tt.in))
		if c != nil {
			t.Errorf("%s: a collection was returned", tt.name)
		}
		t.Run(tt.name, func(t *testing.T) {
			assertProblems(t, err, []Problem{{tt.path, tt.fragment}})
		})
	}
}

func TestCollectionExamplesDecode(t *testing.T) {
	v := newValidator(t)
	for _, name := range exampleFiles(t, "examples/collections") {
		raw, err := schemas.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.DecodeCollection(raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
