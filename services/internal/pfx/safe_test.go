package pfx

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/resched/resched/services/internal/tlstest"
	"software.sslmate.com/src/go-pkcs12"
)

// RFC 2268's test vectors whose effective key length is the key's (as PKCS #12 uses RC2).
func TestRC2(t *testing.T) {
	for _, v := range []struct{ key, plain, sealed string }{
		{"ffffffffffffffff", "ffffffffffffffff", "278b27e42e2f0d49"},
		{"3000000000000000", "1000000000000001", "30649edf9be7d2c2"},
		{"88bca90e90875a7f0f79c384627bafb2", "0000000000000000", "2269552ab0f85ca6"},
	} {
		key, _ := hex.DecodeString(v.key)
		plain, _ := hex.DecodeString(v.plain)
		c, got := newRC2(key), make([]byte, 8)
		if c.Encrypt(got, plain); hex.EncodeToString(got) != v.sealed {
			t.Errorf("key %s: sealed %x, want %s", v.key, got, v.sealed)
		}
		if c.Decrypt(got, got); !bytes.Equal(got, plain) {
			t.Errorf("key %s: opened %x, want %s", v.key, got, v.plain)
		}
	}
}

// A key bag inside an encrypted safe is counted, whatever the safe's algorithm: such a file is
// built here from one go-pkcs12 wrote (its key bag moved in beside the certificates, the safe
// encrypted again and the MAC computed again), and the decoder opening it shows that this
// package's ciphers and key derivation are the decoder's.
func TestAKeyBagInsideAnEncryptedSafeIsCounted(t *testing.T) {
	for _, alg := range []string{"AES", "3DES", "RC2-40", "RC2-128"} {
		// The source file's certificates are opened here too: by RC2 (LegacyRC2), 3DES (Legacy)
		// and PBES2 (Modern).
		for name, enc := range map[string]*pkcs12.Encoder{"LegacyRC2": pkcs12.LegacyRC2, "Legacy": pkcs12.Legacy, "Modern": pkcs12.Modern} {
			der := decode64(t, tlstest.PFXFrom(t, enc, "pw"))
			if _, err := Decode(base64.StdEncoding.EncodeToString(nested(t, der, "pw", alg, 0)), "pw"); err != nil {
				t.Errorf("%s, its key moved into a %s safe: %v; want it opened", name, alg, err)
			}
			_, err := Decode(base64.StdEncoding.EncodeToString(nested(t, der, "pw", alg, 5_000_000)), "pw")
			if err == nil || !strings.Contains(err.Error(), "states 5") || !strings.Contains(err.Error(), "more than the 600000 accepted") {
				t.Errorf("%s, its key moved into a %s safe and stating 5,000,000 iterations: %v; want it refused for them", name, alg, err)
			}
		}
	}
	// The wrong password: refused without the decoder's run (the safe's padding does not match).
	der := nested(t, decode64(t, tlstest.PFXFrom(t, pkcs12.Legacy, "pw")), "pw", "RC2-40", 5_000_000)
	if _, err := Decode(base64.StdEncoding.EncodeToString(der), "other"); err == nil || !strings.Contains(err.Error(), "does not open with this password") {
		t.Errorf("the wrong password: %v", err)
	}
}

func decode64(t *testing.T, s string) []byte {
	t.Helper()
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// nested rewrites a two-safe PFX as one encrypted safe with alg holding all its bags; a
// keyIterations other than 0 replaces the count its key bag states (which then no longer opens).
func nested(t *testing.T, der []byte, password, alg string, keyIterations int) []byte {
	t.Helper()
	var p pfxPDU
	var content []byte
	var safes []contentInfo
	must(t, unmarshal(der, &p))
	must(t, unmarshal(p.AuthSafe.Content.Bytes, &content))
	must(t, unmarshal(content, &safes))
	var bags []safeBag
	for _, ci := range safes {
		var data []byte
		if ci.ContentType.Equal(oidEncryptedData) {
			var ed encryptedData
			must(t, unmarshal(ci.Content.Bytes, &ed))
			var err error
			data, err = openSafe(ed.Info.Algorithm, ed.Info.Content, password)
			must(t, err)
		} else {
			must(t, unmarshal(ci.Content.Bytes, &data))
		}
		var b []safeBag
		must(t, unmarshal(data, &b))
		bags = append(bags, b...)
	}
	for i, b := range bags {
		if keyIterations == 0 || !b.ID.Equal(oidShroudedKeyBag) {
			continue
		}
		var key encryptedKey
		must(t, unmarshal(b.Value.Bytes, &key))
		var params pbeParams // the sources' keys are all PKCS #12 PBE or PBES2
		if unmarshal(key.Algorithm.Parameters.FullBytes, &params) == nil {
			params.Iterations = keyIterations
			key.Algorithm.Parameters.FullBytes = marshal(t, params)
		} else {
			key.Algorithm.Parameters.FullBytes = pbes2DER(t, keyIterations, make([]byte, 8), make([]byte, 16))
		}
		bags[i].Value = asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: marshal(t, key)}
	}
	algorithm, sealed := seal(t, marshal(t, bags), password, alg)
	var ed encryptedData
	ed.Info.ContentType = oidData
	ed.Info.Algorithm = algorithm
	ed.Info.Content = sealed
	edDER := marshal(t, struct {
		Version int
		Info    struct {
			ContentType asn1.ObjectIdentifier
			Algorithm   pkix.AlgorithmIdentifier
			Content     []byte `asn1:"tag:0,optional"`
		}
	}(ed))
	authSafe := marshal(t, []contentInfo{{ContentType: oidEncryptedData, Content: explicit(edDER)}})
	p.AuthSafe.Content = explicit(marshal(t, authSafe))
	salt := make([]byte, 8)
	rand.Read(salt)
	mac := hmac.New(sha1.New, deriveKey(salt, pkcs12Passwords(password)[0], 2048, 3, 20))
	mac.Write(authSafe)
	p.MacData.Mac.Algorithm = pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}, Parameters: asn1.NullRawValue}
	p.MacData.Mac.Digest = mac.Sum(nil)
	p.MacData.MacSalt, p.MacData.Iterations = salt, 2048
	return marshal(t, p)
}

// seal encrypts a safe's content as alg: PBES2 (AES-256, PBKDF2 with SHA-256) or the PKCS #12
// PBE with 3DES or RC2, 2,048 iterations.
func seal(t *testing.T, plain []byte, password, alg string) (pkix.AlgorithmIdentifier, []byte) {
	salt := make([]byte, 8)
	rand.Read(salt)
	var block cipher.Block
	var iv []byte
	var id pkix.AlgorithmIdentifier
	switch alg {
	case "AES":
		iv = make([]byte, 16)
		rand.Read(iv)
		key, err := pbkdf2.Key(sha256.New, password, salt, 2048, 32)
		must(t, err)
		block, err = aes.NewCipher(key)
		must(t, err)
		id = pkix.AlgorithmIdentifier{Algorithm: oidPBES2, Parameters: asn1.RawValue{FullBytes: pbes2DER(t, 2048, salt, iv)}}
	default:
		oid, size := map[string]asn1.ObjectIdentifier{"3DES": oidPBEWithSHA3DES, "RC2-40": oidPBEWithSHARC240, "RC2-128": oidPBEWithSHARC2128}[alg],
			map[string]int{"3DES": 24, "RC2-40": 5, "RC2-128": 16}[alg]
		pw := pkcs12Passwords(password)[0]
		key := deriveKey(salt, pw, 2048, 1, size)
		iv = deriveKey(salt, pw, 2048, 2, 8)
		block = newRC2(key)
		if size == 24 {
			var err error
			block, err = des.NewTripleDESCipher(key)
			must(t, err)
		}
		id = pkix.AlgorithmIdentifier{Algorithm: oid, Parameters: asn1.RawValue{FullBytes: marshal(t, pbeParams{Salt: salt, Iterations: 2048})}}
	}
	n := block.BlockSize() - len(plain)%block.BlockSize()
	padded := append(plain, bytes.Repeat([]byte{byte(n)}, n)...)
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(padded, padded)
	return id, padded
}

// pbes2DER is PBES2 parameters: AES-256, PBKDF2 with SHA-256.
func pbes2DER(t *testing.T, iterations int, salt, iv []byte) []byte {
	kdf := marshal(t, struct {
		Salt       []byte
		Iterations int
		PRF        pkix.AlgorithmIdentifier
	}{salt, iterations, pkix.AlgorithmIdentifier{Algorithm: oidHMACWithSHA256, Parameters: asn1.NullRawValue}})
	return marshal(t, struct{ KDF, Scheme pkix.AlgorithmIdentifier }{
		pkix.AlgorithmIdentifier{Algorithm: oidPBKDF2, Parameters: asn1.RawValue{FullBytes: kdf}},
		pkix.AlgorithmIdentifier{Algorithm: oidAES256CBC, Parameters: asn1.RawValue{FullBytes: marshal(t, iv)}},
	})
}

func explicit(der []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: der}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	der, err := asn1.Marshal(v)
	must(t, err)
	return der
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
