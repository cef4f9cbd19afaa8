package job

import (
	"encoding/json"
	"testing"
	"time"
)

func TestRetryPolicyDefaults(t *testing.T) {
	tests := []struct {
		name     string
		policy   string // JSON; "" for an absent policy
		kind     RetryType
		count    int
		interval time.Duration
	}{
		{"absent", "", RetryFixed, 4, 30 * time.Second},
		{"empty", `{}`, RetryFixed, 4, 30 * time.Second},
		{"none", `{"retryType":"none"}`, RetryNone, 0, 30 * time.Second},
		{"none ignores count", `{"retryType":"None","retryCount":5}`, RetryNone, 0, 30 * time.Second},
		{"fixed defaults", `{"retryType":"Fixed"}`, RetryFixed, 4, 30 * time.Second},
		{"fixed zero count", `{"retryType":"Fixed","retryCount":0}`, RetryFixed, 0, 30 * time.Second},
		{"fixed given", `{"retryType":"Fixed","retryCount":2,"retryInterval":"PT1D"}`, RetryFixed, 2, 24 * time.Hour},
		{"timespan", `{"retryInterval":"00:01:00"}`, RetryFixed, 4, time.Minute},
	}
	for _, tt := range tests {
		var p *RetryPolicy
		if tt.policy != "" {
			p = new(RetryPolicy)
			if err := json.Unmarshal([]byte(tt.policy), p); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
		}
		if got := p.Kind(); got != tt.kind {
			t.Errorf("%s: Kind() = %q, want %q", tt.name, got, tt.kind)
		}
		if got := p.Count(); got != tt.count {
			t.Errorf("%s: Count() = %d, want %d", tt.name, got, tt.count)
		}
		if got := p.Interval(); got != tt.interval {
			t.Errorf("%s: Interval() = %v, want %v", tt.name, got, tt.interval)
		}
	}
}

func TestRetryDefaultsAreNotWritten(t *testing.T) {
	var a Action
	if err := json.Unmarshal([]byte(`{"type":"Http","request":{"uri":"http://localhost:8080/","method":"GET"}}`), &a); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(a)
	if want := `{"type":"Http","request":{"uri":"http://localhost:8080/","method":"GET"}}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
}
