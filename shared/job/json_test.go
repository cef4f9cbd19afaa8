package job

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Date-times and frequencies are written as the canonical text (a frequency not set as null)
// and read back as they were.
func TestDateTimeAndFrequencyJSON(t *testing.T) {
	type doc struct {
		Start   *DateTime `json:"start"`
		Local   DateTime  `json:"local"`
		Absent  *DateTime `json:"absent,omitempty"`
		Every   Frequency `json:"every"`
		Unknown Frequency `json:"unknown"`
	}
	start, err := ParseDateTime("2026-03-29T01:30:00.25+05:30")
	if err != nil {
		t.Fatal(err)
	}
	local, err := ParseDateTime("2026-10-25T02:30:00")
	if err != nil {
		t.Fatal(err)
	}
	in := doc{Start: &start, Local: local, Every: Hour}
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"start":"2026-03-29T01:30:00.25+05:30","local":"2026-10-25T02:30:00","every":"Hour","unknown":null}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	var back struct {
		Start *DateTime `json:"start"`
		Local DateTime  `json:"local"`
		Every Frequency `json:"every"`
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if *back.Start != start || back.Local != local || back.Every != Hour {
		t.Fatalf("read back %+v, want %+v", back, in)
	}
}

// TestDateTimeString writes every shape of time text as fmt's padded formatting did.
func TestDateTimeString(t *testing.T) {
	for _, in := range []string{
		"2012-08-04", "0001-01-01", "9999-12-31T23:59:59Z", "2026-03-29T01:30:00",
		"2026-03-29T01:30:05.25+05:30", "2026-03-29T01:30:05.000000001-09:45",
		"2026-03-29T01:30:05.123456789Z", "2026-03-29T00:00:00+00:01", "0042-02-03T04:05:06-00:30",
	} {
		d, err := ParseDateTime(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		want := fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
		if !d.DateOnly {
			want += fmt.Sprintf("T%02d:%02d:%02d", d.Hour, d.Minute, d.Second)
			if d.Nanosecond != 0 {
				want += strings.TrimRight(fmt.Sprintf(".%09d", d.Nanosecond), "0")
			}
			switch off := d.Offset; {
			case !d.HasOffset:
			case off == 0:
				want += "Z"
			case off < 0:
				want += fmt.Sprintf("-%02d:%02d", -off/3600, -off%3600/60)
			default:
				want += fmt.Sprintf("+%02d:%02d", off/3600, off%3600/60)
			}
		}
		if got := d.String(); got != want || got != in {
			t.Errorf("%s: String() = %q, want %q", in, got, want)
		}
		if text, _ := d.MarshalText(); string(text) != want {
			t.Errorf("%s: MarshalText() = %q, want %q", in, text, want)
		}
	}
}
