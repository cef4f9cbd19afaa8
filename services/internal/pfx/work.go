package pfx

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math"
)

// MaxIterations bounds the key-derivation iterations a PFX may state in all: its MAC's, each
// encrypted part's and each key's. A PFX carries its own counts, and the decoder (go-pkcs12,
// which has no bound of its own) honours them: a 1 KB file whose MAC asks for 2^31 iterations
// held a planner's core for about 3 minutes per put, and a worker's per attempt (the count goes
// up to 2^63). Tools export with 2,000 to 10,000 a part (OpenSSL 2,048), the JDK before 11.0.12
// with 50,000 a part and 100,000 for the MAC (200,000 in all); .NET refuses a file over
// 600,000 (Microsoft KB5025823), as this does. Opening a file at the bound takes a core about
// 0.15 s (BenchmarkDecodeAtTheBound); a bulk put stops checking at half its request's deadline
// (package jobs), so many such files hold a planner no longer than that.
const MaxIterations = 600_000

// The algorithms whose iterations are counted; the decoder derives nothing for the others
// (it refuses them as not supported).
var (
	oidData             = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidEncryptedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 6}
	oidShroudedKeyBag   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidPBES2            = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2           = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidPBMAC1           = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 14}
	oidPBEWithSHA3DES   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 3}
	oidPBEWithSHARC2128 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 5}
	oidPBEWithSHARC240  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 6}
)

// The PKCS #12 structures (RFC 7292) as far as they say how much deriving a decode does.
type (
	pfxPDU struct {
		Version  int
		AuthSafe contentInfo
		MacData  macData `asn1:"optional"`
	}
	contentInfo struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue `asn1:"tag:0,explicit,optional"`
	}
	macData struct {
		Mac struct {
			Algorithm pkix.AlgorithmIdentifier
			Digest    []byte
		}
		MacSalt    []byte
		Iterations int `asn1:"optional,default:1"`
	}
	encryptedData struct {
		Version int
		Info    struct {
			ContentType asn1.ObjectIdentifier
			Algorithm   pkix.AlgorithmIdentifier
			Content     []byte `asn1:"tag:0,optional"`
		}
	}
	safeBag struct {
		ID         asn1.ObjectIdentifier
		Value      asn1.RawValue `asn1:"tag:0,explicit"`
		Attributes asn1.RawValue `asn1:"set,optional"`
	}
	encryptedKey struct {
		Algorithm pkix.AlgorithmIdentifier
		Data      []byte
	}
	pbeParams struct {
		Salt       []byte
		Iterations int
	}
	pbes2Params struct { // PBES2 and PBMAC1 alike: a KDF, then a scheme
		KDF    pkix.AlgorithmIdentifier
		Scheme pkix.AlgorithmIdentifier
	}
	pbkdf2Params struct {
		Salt       asn1.RawValue
		Iterations int
		KeyLength  int                      `asn1:"optional"`
		PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
	}
)

// checkWork refuses a PFX that states more than MaxIterations in all, before the decoder runs
// any of them. What an encrypted safe holds is counted too, so the safes are decrypted here
// first (their own counts checked before): a key bag inside one would otherwise be derived
// with whatever count it states.
func checkWork(der []byte, password string) error {
	for _, r := range password {
		if r > 0xffff {
			return nil // the decoder refuses a password it cannot write as a BMPString at once
		}
	}
	total, encrypted, err := outerWork(der)
	if err != nil {
		return err
	}
	if total > MaxIterations {
		return tooMuchWork(total)
	}
	for _, ed := range encrypted {
		n, err := innerWork(ed, password)
		if err != nil {
			return err
		}
		total = add(total, n)
	}
	if total > MaxIterations {
		return tooMuchWork(total)
	}
	return nil
}

// outerWork sums the counts that can be read without a key: the MAC's, each encrypted safe's
// and each key bag's in a plain safe. It returns the encrypted safes.
func outerWork(der []byte) (int, []encryptedData, error) {
	var pfx pfxPDU
	var content []byte
	var safes []contentInfo
	if err := unmarshal(der, &pfx); err != nil {
		return 0, nil, err
	}
	if err := unmarshal(pfx.AuthSafe.Content.Bytes, &content); err != nil {
		return 0, nil, err
	}
	if err := unmarshal(content, &safes); err != nil {
		return 0, nil, err
	}
	total := 0
	if mac := pfx.MacData.Mac.Algorithm; mac.Algorithm.Equal(oidPBMAC1) {
		total = pbkdf2Iterations(mac.Parameters.FullBytes)
	} else if mac.Algorithm != nil {
		total = max(pfx.MacData.Iterations, 0)
	}
	var encrypted []encryptedData
	for _, ci := range safes {
		switch {
		case ci.ContentType.Equal(oidEncryptedData):
			var ed encryptedData
			if err := unmarshal(ci.Content.Bytes, &ed); err != nil {
				return 0, nil, err
			}
			total = add(total, iterations(ed.Info.Algorithm))
			encrypted = append(encrypted, ed)
		case ci.ContentType.Equal(oidData):
			var data []byte
			if err := unmarshal(ci.Content.Bytes, &data); err != nil {
				return 0, nil, err
			}
			n, err := keyBagIterations(data)
			if err != nil {
				return 0, nil, err
			}
			total = add(total, n)
		}
	}
	return total, encrypted, nil
}

// innerWork sums the counts of the key bags inside an encrypted safe.
func innerWork(ed encryptedData, password string) (int, error) {
	data, err := openSafe(ed.Info.Algorithm, ed.Info.Content, password)
	if errors.Is(err, errUnreadable) {
		return 0, nil // the decoder refuses it before deriving anything
	}
	if err != nil {
		return 0, err
	}
	n, err := keyBagIterations(data)
	if err != nil {
		return 0, errWrongPassword // a wrong key can leave a padding that looks right
	}
	return n, nil
}

func tooMuchWork(total int) error {
	return fmt.Errorf("states %d key-derivation iterations in all, more than the %d accepted here (tools export with 2,000 to 100,000 a part, two or three parts): export it again with fewer", total, MaxIterations)
}

// keyBagIterations sums the counts of the shrouded key bags in a safe's content.
func keyBagIterations(safe []byte) (int, error) {
	var bags []safeBag
	if err := unmarshal(safe, &bags); err != nil {
		return 0, err
	}
	total := 0
	for _, b := range bags {
		var key encryptedKey
		if !b.ID.Equal(oidShroudedKeyBag) {
			continue
		}
		if err := unmarshal(b.Value.Bytes, &key); err != nil {
			return 0, err
		}
		total = add(total, iterations(key.Algorithm))
	}
	return total, nil
}

// iterations is the count an encryption algorithm states: the PKCS #12 PBE's, or PBES2's
// PBKDF2's.
func iterations(algorithm pkix.AlgorithmIdentifier) int {
	switch a := algorithm.Algorithm; {
	case a.Equal(oidPBEWithSHA3DES), a.Equal(oidPBEWithSHARC2128), a.Equal(oidPBEWithSHARC240):
		var p pbeParams
		if unmarshal(algorithm.Parameters.FullBytes, &p) != nil {
			return 0 // refused by the decoder before it derives
		}
		return p.Iterations
	case a.Equal(oidPBES2):
		return pbkdf2Iterations(algorithm.Parameters.FullBytes)
	}
	return 0
}

// pbkdf2Iterations reads the count of PBES2 or PBMAC1 parameters whose KDF is PBKDF2.
func pbkdf2Iterations(params []byte) int {
	_, kdf, ok := readPBES2(params)
	if !ok {
		return 0
	}
	return kdf.Iterations
}

// readPBES2 reads PBES2 or PBMAC1 parameters whose KDF is PBKDF2; false for any others.
func readPBES2(params []byte) (pbes2Params, pbkdf2Params, bool) {
	var p pbes2Params
	var kdf pbkdf2Params
	ok := unmarshal(params, &p) == nil && p.KDF.Algorithm.Equal(oidPBKDF2) && unmarshal(p.KDF.Parameters.FullBytes, &kdf) == nil
	return p, kdf, ok
}

// add sums counts without overflowing: a negative count derives nothing, and a sum past the
// largest int stays there (still over, and the error says what the file asks for).
func add(a, b int) int {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// unmarshal reads DER with nothing after it, as the decoder does.
func unmarshal(der []byte, v any) error {
	rest, err := asn1.Unmarshal(der, v)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%d bytes after the data", len(rest))
	}
	return err
}
