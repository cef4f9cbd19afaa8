// Package timezone turns the timeZone of a job definition into a *time.Location.
//
// A name is either an IANA tz database name, exactly as the database spells it ("Europe/Paris",
// "UTC"), or a Windows time zone name ("Pacific Standard Time", any letter case), which maps to
// the IANA zone the CLDR windowsZones table gives for territory 001 (docs/recurrence.md §2).
//
// The tz database is embedded (time/tzdata), so zones resolve the same on hosts and in
// containers that have no /usr/share/zoneinfo.
package timezone

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zones must load where the system has no tz database
)

// ErrUnknown is wrapped by every error Load returns for a name it cannot resolve.
var ErrUnknown = errors.New("unknown time zone")

// locations caches loaded zones by IANA name. time.LoadLocation reads and parses a tz file on
// every call (tens of microseconds), and the planner resolves a job's zone each time it computes
// a fire time. Only names that loaded are stored, and only under their IANA spelling, so the
// cache is bounded by the size of the tz database whatever names callers pass. A *time.Location
// is immutable and safe for concurrent use, so sharing one per name is sound.
var locations sync.Map // string → *time.Location

// Load returns the location for an IANA or a Windows time zone name. IANA names match exactly
// (case-sensitive on Linux, whose file system is; the embedded database always is); Windows
// names match ignoring case. "", "Local" and "localtime" are rejected: a job's zone must not
// depend on the host the planner runs on. A name that is both ("UTC") is taken as IANA.
func Load(name string) (*time.Location, error) {
	if isIANAName(name) {
		if loc, ok := loadIANA(name); ok {
			return loc, nil
		}
	}
	if iana, ok := windowsZones[strings.ToLower(name)]; ok {
		if loc, ok := loadIANA(iana); ok {
			return loc, nil
		}
		// Unreachable while TestWindowsTargetsLoad passes; kept so a bad table fails loudly.
		return nil, fmt.Errorf("%w %q: Windows zone maps to %q, which the tz database lacks", ErrUnknown, name, iana)
	}
	return nil, fmt.Errorf("%w %q: not an IANA tz database name or a Windows time zone name", ErrUnknown, name)
}

// loadIANA loads an IANA zone through the cache.
func loadIANA(name string) (*time.Location, bool) {
	if v, ok := locations.Load(name); ok {
		return v.(*time.Location), true
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, false
	}
	v, _ := locations.LoadOrStore(name, loc)
	return v.(*time.Location), true
}

// isIANAName reports whether name has the shape of a tz database name: components of letters,
// digits, '_', '-' and '+' joined by '/'. It keeps names with spaces (Windows names), relative
// and absolute paths away from time.LoadLocation, and the names whose meaning depends on the
// host: "" and "Local" (time.LoadLocation's own), and "localtime" (Debian's zoneinfo links it
// to /etc/localtime).
func isIANAName(name string) bool {
	if name == "" || name == "Local" || name == "localtime" || len(name) > 64 {
		return false
	}
	prev := byte('/') // a name may not start with '/', nor hold "//"
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '/' && prev == '/' || c != '/' && !isIANAByte(c) {
			return false
		}
		prev = c
	}
	return prev != '/'
}

func isIANAByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '-' || c == '+'
}
