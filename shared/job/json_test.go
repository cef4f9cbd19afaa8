package job

import (
	"encoding/json"
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
