package version

import "testing"

func TestSemver(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":            "1.2.3",
		"v1.2.3-4-gabc1234": "1.2.3-4-gabc1234",
		"f085e2f":           "0.0.0+f085e2f",
		"f085e2f-dirty":     "0.0.0+f085e2f-dirty",
		"(devel)":           "0.0.0+devel",
	} {
		linked = in
		if got := Semver(); got != want {
			t.Errorf("Semver of %q = %q, want %q", in, got, want)
		}
	}
}
