package secrets

import (
	"strings"
	"testing"
)

// FuzzOpen feeds Open values a client could have stored in a secret field: it must never
// panic, and nothing but a value sealed for the binding opens (the seed is one, but each
// fuzzing process seals its own, with its own nonce).
func FuzzOpen(f *testing.F) {
	k := ring(f, "k1=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	good, _ := k.Seal("clear", "a")
	for _, s := range []string{good, Prefix, Prefix + "k1", Prefix + "k1:", Prefix + ":x", Prefix + "k1:!!", Prefix + "k2:AAAA", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := k.Open(v, "a")
		if err == nil && got != "clear" { // only a genuine seal opens; the fuzzer cannot forge one
			t.Errorf("Open(%q) = %q without an error", v, got)
		}
	})
}

// FuzzParseKeys: any text either makes a keyring whose keys seal and open, or an error that
// does not echo the text's key material.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{"k1=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "a=b", "#\n", "x=,y=", "k=" + strings.Repeat("A", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		k, err := ParseKeys(text)
		if err != nil {
			return
		}
		s, err := k.Seal("v", "b")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Open(s, "b"); err != nil || got != "v" {
			t.Errorf("round trip: %q, %v", got, err)
		}
	})
}
