package recurrence_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// BenchmarkNext times one "next execution after t" question per iteration, for each rule of
// peerRules × each start of peerStarts × each library, named rule/start/library so benchstat
// can compare them (docs/benchmarks.md). Every library answers the same questions: the
// instants of queryRing, walked forward and wrapped around, as a planner asks after each fire.
// Compiling and parsing happen before the timed loop.
//
// rrule-go is given the start as its DTSTART, as a scheduler storing the job's definition
// would: its After iterates the series from DTSTART, so its cost grows with the start's age,
// which is what the 20-year case shows.
func BenchmarkNext(b *testing.B) {
	ring := queryRing()
	mask := len(ring) - 1 // len(ring) is a power of two
	for _, r := range peerRules {
		for _, st := range peerStarts {
			p := compilePeers(b, r, st.years, st.days)
			prefix := r.name + "/" + st.name + "/"
			b.Run(prefix+"resched", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					p.resched.Next(ring[i&mask], 0)
				}
			})
			b.Run(prefix+"rrule-go", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					p.rrule.After(ring[i&mask], false)
				}
			})
			if p.cron == nil {
				continue // cron cannot express the rule
			}
			b.Run(prefix+"cron", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					p.cron.Next(ring[i&mask])
				}
			})
		}
	}
}

// BenchmarkCompile times recurrence.Compile for each rule with the start 20 years back: the
// work the planner does once when it accepts a definition (the JSON is decoded beforehand).
func BenchmarkCompile(b *testing.B) {
	for _, r := range peerRules {
		var rec job.Recurrence
		if err := json.Unmarshal([]byte(r.rec), &rec); err != nil {
			b.Fatalf("%s: recurrence: %v", r.name, err)
		}
		d := peerNow.AddDate(-20, 0, -1)
		start := job.DateTime{Year: d.Year(), Month: d.Month(), Day: d.Day(), Hour: r.hour, Minute: r.minute, HasOffset: r.zone == ""}
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := recurrence.Compile(&start, &rec, peerNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQueryRingWalksForward guards the premise of BenchmarkNext: the questions move forward
// through a year and do not repeat within the ring.
func TestQueryRingWalksForward(t *testing.T) {
	ring := queryRing()
	if len(ring)&(len(ring)-1) != 0 {
		t.Fatalf("ring length %d is not a power of two", len(ring))
	}
	for i := 1; i < len(ring); i++ {
		if !ring[i].After(ring[i-1]) {
			t.Fatalf("ring[%d] = %s is not after ring[%d] = %s", i, ring[i], i-1, ring[i-1])
		}
	}
	if span := ring[len(ring)-1].Sub(ring[0]); span < 360*24*time.Hour || span > 366*24*time.Hour {
		t.Errorf("ring spans %s, want about a year", span)
	}
}
