package pfx_test

import (
	"encoding/asn1"
	"encoding/base64"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/pfx"
	"github.com/resched/resched/services/internal/tlstest"
	"software.sslmate.com/src/go-pkcs12"
)

// encode is a PFX of "resched test" and its key, written by enc.
func encode(t testing.TB, enc *pkcs12.Encoder, password string) []byte {
	t.Helper()
	der, err := base64.StdEncoding.DecodeString(tlstest.PFXFrom(t, enc, password))
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func b64(der []byte) string { return base64.StdEncoding.EncodeToString(der) }

// The files the usual tools export decode: go-pkcs12's every encoder, and OpenSSL's default
// (PBES2 with AES) and legacy (3DES and RC2) exports.
func TestDecodeOpensTheFilesToolsExport(t *testing.T) {
	files := map[string][]byte{}
	for name, enc := range map[string]*pkcs12.Encoder{"Modern": pkcs12.Modern, "Modern2023": pkcs12.Modern2023, "Modern2026": pkcs12.Modern2026,
		"Legacy": pkcs12.Legacy, "LegacyRC2": pkcs12.LegacyRC2, "LegacyDES": pkcs12.LegacyDES} {
		files["go-pkcs12 "+name] = encode(t, enc, "s3cret")
	}
	passwordless := encode(t, pkcs12.Passwordless, "")
	if openssl, err := exec.LookPath("openssl"); err == nil {
		dir := t.TempDir()
		key, cert := filepath.Join(dir, "key.pem"), filepath.Join(dir, "cert.pem")
		run := func(args ...string) {
			if out, err := exec.Command(openssl, args...).CombinedOutput(); err != nil {
				t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "30", "-subj", "/CN=resched test")
		for name, extra := range map[string][]string{"OpenSSL": nil, "OpenSSL -legacy": {"-legacy"}} {
			out := filepath.Join(dir, strings.ReplaceAll(name, " ", "")+".pfx")
			run(append([]string{"pkcs12", "-export", "-inkey", key, "-in", cert, "-out", out, "-passout", "pass:s3cret"}, extra...)...)
			der, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = der
		}
	} else {
		t.Log("openssl is not installed: its files are not tried")
	}
	if _, err := pfx.Decode(b64(passwordless), ""); err != nil {
		t.Errorf("go-pkcs12 Passwordless (no MAC, nothing encrypted): %v", err)
	}
	for name, der := range files {
		cert, err := pfx.Decode(b64(der), "s3cret")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if d := pfx.Describe(cert.Leaf); d.SubjectName != "CN=resched test" {
			t.Errorf("%s: subject %q", name, d.SubjectName)
		}
	}
}

// A file that asks for more key-derivation work than MaxIterations is refused before any of it
// is done, saying why: the decoder honoured any count, and a 1 KB file kept a core busy for
// minutes (a planner's at each put, a worker's at each attempt).
func TestAFileAskingTooMuchWorkIsRefused(t *testing.T) {
	// The MAC's count raised in place (5,000,000: a few seconds without the bound, then a
	// MAC that does not match).
	var p struct {
		Version  int
		AuthSafe asn1.RawValue
		MacData  struct {
			Mac        asn1.RawValue
			MacSalt    []byte
			Iterations int `asn1:"optional,default:1"`
		}
	}
	if _, err := asn1.Unmarshal(encode(t, pkcs12.Legacy, "s3cret"), &p); err != nil {
		t.Fatal(err)
	}
	raised := func(n int) []byte {
		p.MacData.Iterations = n
		der, err := asn1.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	// What the file states in all is said: the MAC's, and the key's and the certificates' 2,048
	// each.
	if _, err := pfx.Decode(b64(raised(5_000_000)), "s3cret"); err == nil || !strings.Contains(err.Error(), "states 5004096 key-derivation") {
		t.Errorf("the MAC's count raised to 5,000,000: %v; want the 5,004,096 stated said", err)
	}
	if _, err := pfx.Decode(b64(raised(math.MaxInt)), "s3cret"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("states %d key-derivation", math.MaxInt)) {
		t.Errorf("the MAC's count raised to 2^63-1: %v; want it refused, the sum kept from overflowing", err)
	}
	mac := raised(5_000_000)
	for name, tc := range map[string]struct {
		der      []byte
		password string
		refused  bool
	}{
		"the MAC's count raised":                                 {mac, "s3cret", true},
		"PBES2 at 205,000 (615,000 in all)":                      {encode(t, pkcs12.Modern.WithIterations(205_000), "pw"), "pw", true},
		"PBES2 with a PBMAC1 MAC at 205,000 (615,000 in all)":    {encode(t, pkcs12.Modern2026.WithIterations(205_000), "pw"), "pw", true},
		"PBES2 at 195,000 (585,000 in all)":                      {encode(t, pkcs12.Modern.WithIterations(195_000), "pw"), "pw", false},
		"the PKCS #12 PBE at 205,000 (615,000)":                  {encode(t, pkcs12.Legacy.WithIterations(205_000), "pw"), "pw", true},
		"the PKCS #12 PBE at 195,000 (585,000)":                  {encode(t, pkcs12.Legacy.WithIterations(195_000), "pw"), "pw", false},
		"the same with an empty password (its MAC tried twice)":  {encode(t, pkcs12.Legacy.WithIterations(195_000), ""), "", false},
		"the PKCS #12 PBE with RC2 at 100,000 (the JDK 8's MAC)": {encode(t, pkcs12.LegacyRC2.WithIterations(100_000), "pw"), "pw", false},
		"10,000 a part (the JDK's default counts since 11.0.12)": {encode(t, pkcs12.Modern.WithIterations(10_000), "pw"), "pw", false},
	} {
		_, err := pfx.Decode(b64(tc.der), tc.password)
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "key-derivation iterations in all, more than the 600000 accepted")):
			t.Errorf("%s: %v; want it refused for its iterations", name, err)
		case !tc.refused && err != nil:
			t.Errorf("%s: %v; want it opened", name, err)
		}
	}
}

// BenchmarkDecodeAtTheBound: how long a file stating MaxIterations holds a core (the bound's
// worst cases: the PKCS #12 PBE with 3DES, whose key takes two SHA-1 chains, its safe also
// opened by checkWork, with an empty password tried two ways; PBES2 with SHA-256).
func BenchmarkDecodeAtTheBound(b *testing.B) {
	for name, tc := range map[string]struct {
		enc      *pkcs12.Encoder
		password string
	}{
		"3DES, empty password": {pkcs12.Legacy.WithIterations(200_000), ""},
		"3DES":                 {pkcs12.Legacy.WithIterations(200_000), "pw"},
		"PBES2":                {pkcs12.Modern.WithIterations(200_000), "pw"},
		"OpenSSL's 2,048":      {pkcs12.Modern.WithIterations(2048), "pw"},
	} {
		file := b64(encode(b, tc.enc, tc.password))
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := pfx.Decode(file, tc.password); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzDecode: no PFX and password make Decode panic; what it opens has a leaf certificate.
func FuzzDecode(f *testing.F) {
	f.Add(encode(f, pkcs12.Modern, "pw"), "pw")
	f.Add(encode(f, pkcs12.Legacy, ""), "")
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x03}, "")
	f.Fuzz(func(t *testing.T, der []byte, password string) {
		cert, err := pfx.Decode(b64(der), password)
		if err == nil && cert.Leaf == nil {
			t.Error("opened without a leaf certificate")
		}
	})
}
