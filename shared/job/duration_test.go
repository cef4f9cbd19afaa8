package job

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"PT30S", 30 * time.Second},
		{"pt30s", 30 * time.Second},
		{"PT1M", time.Minute},
		{"PT1H30M", 90 * time.Minute},
		{"PT1.5S", 1500 * time.Millisecond},
		{"PT0,25S", 250 * time.Millisecond},
		{"P1D", 24 * time.Hour},
		{"PT1D", 24 * time.Hour}, // the reference's own example (section 6.5) puts D after T
		{"P1DT2H", 26 * time.Hour},
		{"P2W", 14 * 24 * time.Hour},
		{"P1W1D", 8 * 24 * time.Hour},
		{"00:00:30", 30 * time.Second},
		{"00:01:00", time.Minute},
		{"1:2:3", time.Hour + 2*time.Minute + 3*time.Second},
		{"01:30", 90 * time.Minute},
		{"1.02:03:04", 26*time.Hour + 3*time.Minute + 4*time.Second},
		{"00:00:00.5", 500 * time.Millisecond},
		{"00:00:01.1234567", time.Second + 123456700},
		{"00:00:01.1234567891", time.Second + 123456700}, // to the tick, as .NET keeps it
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil {
			t.Errorf("ParseDuration(%q): %v", tt.in, err)
			continue
		}
		if got.Std() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got.Std(), tt.want)
		}
	}
}

func TestParseDurationRejects(t *testing.T) {
	tests := []struct{ in, fragment string }{
		{"", "empty"},
		{"30", "not a duration"},
		{"-00:00:30", "negative"},
		{"P", "nothing after P"},
		{"PT", "nothing after T"},
		{"P1M", "no fixed length"},
		{"P1Y", "no fixed length"},
		{"PT1X", "unknown unit"},
		{"PT1S1M", "out of order"},
		{"PT1M1M", "out of order"},
		{"PT1.5M", "only on the seconds"},
		{"PT5", "no unit"},
		{"PTS", "expected a number"},
		{"P99999999999999999999D", "too long"},
		{"P106752D", "too long"},
		{"P1DT1D", "out of order"},
		{"00:60:00", "out of range"},
		{"24:00:00", "out of range"},
		{"00:00:60", "out of range"},
		{"00:00:00:00", "too many colons"},
		{"x.00:00:00", "bad day count"},
		{"00:00:01.", "expected digits"},
		{"00:0a:01", "one or two digits"},
		{"000:00:01", "one or two digits"},
	}
	for _, tt := range tests {
		_, err := ParseDuration(tt.in)
		if err == nil {
			t.Errorf("ParseDuration(%q) succeeded, want an error", tt.in)
			continue
		}
		if !strings.Contains(err.Error(), tt.fragment) {
			t.Errorf("ParseDuration(%q) = %q, want it to contain %q", tt.in, err, tt.fragment)
		}
	}
}

func TestDurationString(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "00:00:00"},
		{30 * time.Second, "00:00:30"},
		{time.Hour + 2*time.Minute + 3*time.Second, "01:02:03"},
		{24 * time.Hour, "1.00:00:00"},
		{26*time.Hour + 3*time.Minute + 4*time.Second, "1.02:03:04"},
		{548 * 24 * time.Hour, "548.00:00:00"},
		{1500 * time.Millisecond, "00:00:01.5000000"},
	}
	for _, tt := range tests {
		if got := DurationOf(tt.in).String(); got != tt.want {
			t.Errorf("DurationOf(%v).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestDurationISO: a duration read as ISO 8601 is written as ISO 8601, in a form that reads
// back to the same span.
func TestDurationISO(t *testing.T) {
	tests := []struct{ in, want string }{
		{"PT30S", "PT30S"},
		{"pt30s", "PT30S"},
		{"PT0S", "PT0S"},
		{"PT1M", "PT1M"},
		{"PT90S", "PT1M30S"},
		{"PT1H30M", "PT1H30M"},
		{"PT1.5S", "PT1.5S"},
		{"PT0,25S", "PT0.25S"},
		{"P1D", "P1D"},
		{"PT1D", "P1D"},
		{"P1DT2H", "P1DT2H"},
		{"P2W", "P14D"},
		{"P1DT0.000000001S", "P1DT0.000000001S"},
		{"P548D", "P548D"},
	}
	for _, tt := range tests {
		d, err := ParseDuration(tt.in)
		if err != nil {
			t.Fatalf("ParseDuration(%q): %v", tt.in, err)
		}
		if got := d.String(); got != tt.want {
			t.Errorf("ParseDuration(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Errorf("%q read back as %v, %v; want %v", d.String(), back, err, d)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	var p RetryPolicy
	if err := json.Unmarshal([]byte(`{"retryType":"fixed","retryInterval":"PT1D","retryCount":2}`), &p); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"retryType":"Fixed","retryInterval":"P1D","retryCount":2}`; string(out) != want {
		t.Errorf("round trip = %s, want %s", out, want)
	}
	p = RetryPolicy{}
	if err := json.Unmarshal([]byte(`{"retryInterval":"1.00:00:00"}`), &p); err != nil {
		t.Fatal(err)
	}
	if out, _ = json.Marshal(p); string(out) != `{"retryInterval":"1.00:00:00"}` {
		t.Errorf("a TimeSpan round trip = %s, want it as it came", out)
	}
	if err := json.Unmarshal([]byte(`{"retryInterval":30}`), &p); err == nil {
		t.Error("a number as retryInterval was accepted")
	}
}

// FuzzParseDuration: whatever ParseDuration accepts is written back (String) as a text it reads
// as the same span in the same form, so a stored definition answers what was sent.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"PT30S", "pt1.5s", "P1DT2H", "P2W", "PT0,25S", "00:00:30", "1.02:03:04", "00:00:01.1234567891", "01:30", "P1DT0.000000001S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("%q read as %v (%s), written %q, read back as %v, %v", s, d.Std(), d.ISO(), d.String(), back, err)
		}
		if iso, err := ParseDuration(d.ISO()); err != nil || iso.Std() != d.Std() {
			t.Fatalf("%q: ISO %q read back as %v, %v", s, d.ISO(), iso.Std(), err)
		}
		if ts, err := ParseDuration(d.TimeSpan()); err != nil || ts.Std() != d.Std().Truncate(100) {
			t.Fatalf("%q: TimeSpan %q read back as %v, %v", s, d.TimeSpan(), ts.Std(), err)
		}
	})
}
