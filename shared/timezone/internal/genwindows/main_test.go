package main

import (
	"strings"
	"testing"
)

const sample = `<?xml version="1.0" encoding="UTF-8" ?>
<supplementalData>
	<windowsZones>
		<mapTimezones otherVersion="7e11800" typeVersion="2021a">
			<!-- (UTC-08:00) Pacific Time (US & Canada) -->
			<mapZone other="Pacific Standard Time" territory="001" type="America/Los_Angeles"/>
			<mapZone other="Pacific Standard Time" territory="CA" type="America/Vancouver"/>
			<mapZone other="India Standard Time" territory="001" type="Asia/Calcutta"/>
			<mapZone other="UTC" territory="ZZ" type="Etc/UTC Etc/GMT"/>
		</mapTimezones>
	</windowsZones>
</supplementalData>
`

func TestGenerate(t *testing.T) {
	src, err := generate(strings.NewReader(sample), "46")
	if err != nil {
		t.Fatal(err)
	}
	got := string(src)
	for _, want := range []string{
		"DO NOT EDIT",
		"package timezone",
		`CLDR 46`,
		`otherVersion "7e11800", typeVersion "2021a"`,
		`"pacific standard time": "America/Los_Angeles",`,
		`"india standard time":   "Asia/Calcutta",`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, notWant := range []string{"Vancouver", "Etc/GMT"} {
		if strings.Contains(got, notWant) {
			t.Errorf("output has non-001 entry %q:\n%s", notWant, got)
		}
	}
}

func TestGenerateRejects(t *testing.T) {
	tests := map[string]string{
		"no 001 entries": `<supplementalData><windowsZones><mapTimezones>
			<mapZone other="X" territory="ZZ" type="Etc/UTC"/></mapTimezones></windowsZones></supplementalData>`,
		"two 001 entries": `<supplementalData><windowsZones><mapTimezones>
			<mapZone other="X" territory="001" type="Etc/UTC"/>
			<mapZone other="x" territory="001" type="Etc/GMT"/></mapTimezones></windowsZones></supplementalData>`,
		"several zones in 001": `<supplementalData><windowsZones><mapTimezones>
			<mapZone other="X" territory="001" type="Etc/UTC Etc/GMT"/></mapTimezones></windowsZones></supplementalData>`,
		"not xml": `{"json": true}`,
	}
	for name, in := range tests {
		if _, err := generate(strings.NewReader(in), "46"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
