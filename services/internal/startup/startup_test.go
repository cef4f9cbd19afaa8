package startup

import (
	"runtime/debug"
	"testing"
)

func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	SetGCPercent(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GC percent without GOGC = %d, want %d", got, defaultGCPercent)
	}
	SetGCPercent(func(k string) string { return map[string]string{"GOGC": "50"}[k] })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent with GOGC set = %d, want it left alone (100)", got)
	}
}
