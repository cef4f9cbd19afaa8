package timezone

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLoadResolves(t *testing.T) {
	tests := []struct {
		name string
		want string // the IANA name of the location
	}{
		{"Europe/Paris", "Europe/Paris"},
		{"UTC", "UTC"},
		{"America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"},
		{"Etc/GMT+12", "Etc/GMT+12"},
		{"America/Port-au-Prince", "America/Port-au-Prince"},
		{"Asia/Kolkata", "Asia/Kolkata"},
		{"Pacific Standard Time", "America/Los_Angeles"},
		{"pacific standard time", "America/Los_Angeles"},
		{"PACIFIC STANDARD TIME", "America/Los_Angeles"},
		{"W. Europe Standard Time", "Europe/Berlin"},
		{"w. europe standard time", "Europe/Berlin"},
		{"India Standard Time", "Asia/Calcutta"},
		{"Romance Standard Time", "Europe/Paris"},
		{"Pacific Standard Time (Mexico)", "America/Tijuana"},
		{"Central Standard Time", "America/Chicago"},
		{"AUS Eastern Standard Time", "Australia/Sydney"},
		{"UTC-11", "Etc/GMT+11"},
		{"utc+12", "Etc/GMT-12"},
		{"utc", "Etc/UTC"}, // not the IANA "UTC" (case differs), so the Windows name
		{"Line Islands Standard Time", "Pacific/Kiritimati"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := Load(tt.name)
			if err != nil {
				t.Fatalf("Load(%q): %v", tt.name, err)
			}
			if got := loc.String(); got != tt.want {
				t.Errorf("Load(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

// TestLoadOffsets checks the locations carry real zone rules, not just names.
func TestLoadOffsets(t *testing.T) {
	tests := []struct {
		name    string
		at      time.Time
		wantOff int // seconds east of UTC
	}{
		{"Pacific Standard Time", time.Date(2020, 9, 21, 17, 30, 0, 0, time.UTC), -7 * 3600},
		{"Pacific Standard Time", time.Date(2020, 12, 21, 17, 30, 0, 0, time.UTC), -8 * 3600},
		{"India Standard Time", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), 5*3600 + 1800},
		{"Europe/Paris", time.Date(2021, 7, 1, 0, 0, 0, 0, time.UTC), 2 * 3600},
		{"Etc/GMT+12", time.Date(2021, 7, 1, 0, 0, 0, 0, time.UTC), -12 * 3600},
	}
	for _, tt := range tests {
		loc, err := Load(tt.name)
		if err != nil {
			t.Fatalf("Load(%q): %v", tt.name, err)
		}
		if _, off := tt.at.In(loc).Zone(); off != tt.wantOff {
			t.Errorf("%s at %s: offset %d, want %d", tt.name, tt.at.Format(time.RFC3339), off, tt.wantOff)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	names := []string{
		"",
		"Local",
		"localtime",
		"Foo/Bar",
		"europe/paris", // IANA names are case-sensitive
		"EUROPE/PARIS",
		"Europe/Paris ",
		" Europe/Paris",
		"Europe//Paris",
		"/Europe/Paris",
		"Europe/Paris/",
		"/usr/share/zoneinfo/Europe/Paris",
		"../zoneinfo/UTC",
		"Europe/../UTC",
		"..",
		"Europe\\Paris",
		"Pacific Standard",
		"Pacific  Standard Time",
		"Pacific Standard Time\x00",
		"Europe",
		"zone.tab",
		strings.Repeat("A", 100),
	}
	for _, name := range names {
		loc, err := Load(name)
		if err == nil {
			t.Errorf("Load(%q) = %v, want an error", name, loc)
			continue
		}
		if !errors.Is(err, ErrUnknown) {
			t.Errorf("Load(%q) error %v does not wrap ErrUnknown", name, err)
		}
	}
}

func TestLoadErrorText(t *testing.T) {
	_, err := Load("Foo/Bar")
	want := `unknown time zone "Foo/Bar": not an IANA tz database name or a Windows time zone name`
	if err == nil || err.Error() != want {
		t.Fatalf("Load(\"Foo/Bar\") error = %v, want %q", err, want)
	}
}

// TestWindowsTargetsLoad guards the generated table: every IANA name it maps to must exist.
func TestWindowsTargetsLoad(t *testing.T) {
	if n := len(windowsZones); n < 130 {
		t.Fatalf("windowsZones has %d entries, want the whole CLDR territory 001 list (~140)", n)
	}
	for win, iana := range windowsZones {
		if win != strings.ToLower(win) {
			t.Errorf("key %q is not lower case, so it can never match", win)
		}
		if _, err := time.LoadLocation(iana); err != nil {
			t.Errorf("%q maps to %q: %v", win, iana, err)
		}
		loc, err := Load(win)
		if err != nil {
			t.Errorf("Load(%q): %v", win, err)
			continue
		}
		// "utc" stays the Windows name; every other key is not an IANA name at all.
		if loc.String() != iana {
			t.Errorf("Load(%q) = %q, want %q", win, loc.String(), iana)
		}
	}
}

func TestLoadCachesOneLocationPerZone(t *testing.T) {
	a, err := Load("Pacific Standard Time")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("pacific standard time")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a != c {
		t.Errorf("Windows and IANA names of one zone gave distinct locations: %p %p %p", a, b, c)
	}
}

func TestLoadConcurrent(t *testing.T) {
	names := []string{"Europe/Paris", "Tokyo Standard Time", "Asia/Tokyo", "Foo/Bar", "UTC"}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(names))
	for i := 0; i < 8; i++ {
		for _, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := Load(name)
				if (err != nil) != (name == "Foo/Bar") {
					errs <- fmt.Errorf("Load(%q): error %v", name, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func BenchmarkLoadCached(b *testing.B) {
	for _, name := range []string{"Europe/Paris", "Pacific Standard Time"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Load(name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzLoad checks that no input panics and that only the two accepted kinds of name resolve.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{"Europe/Paris", "Pacific Standard Time", "utc", "../etc/passwd", "Local", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		loc, err := Load(name)
		if err != nil {
			if !errors.Is(err, ErrUnknown) {
				t.Fatalf("Load(%q): error %v does not wrap ErrUnknown", name, err)
			}
			return
		}
		_, windows := windowsZones[strings.ToLower(name)]
		if loc == nil || !isIANAName(name) && !windows {
			t.Fatalf("Load(%q) = %v, but it is neither an IANA-shaped nor a Windows name", name, loc)
		}
	})
}
