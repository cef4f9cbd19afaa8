package pfx

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math"
)

// MaxIterations bounds the key-derivation iterations a PFX may ask for in all. A PFX carries
// its own counts, and the decoder (go-pkcs12, which has no bound of its own) honours them: a
// 1 KB file whose MAC asks for 2^31 iterations held a planner's core for about 3 minutes per
// put, and a worker's per attempt (the count goes up to 2^63). Tools export with 2,000 to
// 10,000 a part (OpenSSL 2,048; a file has two or three parts): ten times the most of those
// keeps a decode near 0.04 s (measured: 3,000,000 in 0.37 s), so that a bulk put of 1,000
// jobs, each with its file, holds its planner well under a minute. .NET refuses over 600,000.
const MaxIterations = 300_000

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

// checkWork refuses a PFX that asks for more than MaxIterations in all, before any of them
// is run: the MAC's, each encrypted safe's and each key bag's that is not itself inside an
// encrypted safe (what is inside one can be read only by deriving its key; the files that
// tools export keep their key bag outside). An empty password counts the MAC twice: the
// decoder tries it a second way.
func checkWork(der []byte, password string) error {
	var pfx pfxPDU
	if err := unmarshal(der, &pfx); err != nil {
		return err
	}
	total := 0
	if pfx.MacData.Mac.Algorithm.Algorithm != nil {
		n := pfx.MacData.Iterations
		if pfx.MacData.Mac.Algorithm.Algorithm.Equal(oidPBMAC1) {
			n = pbkdf2Iterations(pfx.MacData.Mac.Algorithm.Parameters.FullBytes)
		}
		if password == "" {
			n *= 2
		}
		total = add(total, n)
	}
	var safes []contentInfo
	var content []byte
	if err := unmarshal(pfx.AuthSafe.Content.Bytes, &content); err != nil {
		return err
	}
	if err := unmarshal(content, &safes); err != nil {
		return err
	}
	for _, ci := range safes {
		switch {
		case ci.ContentType.Equal(oidEncryptedData):
			var ed encryptedData
			if err := unmarshal(ci.Content.Bytes, &ed); err != nil {
				return err
			}
			total = add(total, iterations(ed.Info.Algorithm))
		case ci.ContentType.Equal(oidData):
			var data []byte
			var bags []safeBag
			if err := unmarshal(ci.Content.Bytes, &data); err != nil {
				return err
			}
			if err := unmarshal(data, &bags); err != nil {
				return err
			}
			for _, b := range bags {
				var key encryptedKey
				if !b.ID.Equal(oidShroudedKeyBag) {
					continue
				}
				if err := unmarshal(b.Value.Bytes, &key); err != nil {
					return err
				}
				total = add(total, iterations(key.Algorithm))
			}
		}
	}
	if total > MaxIterations {
		return fmt.Errorf("asks for %d key-derivation iterations in all, more than the %d accepted here (tools export with 2,000 to 10,000 a part, two or three parts): export it again with fewer", total, MaxIterations)
	}
	return nil
}

// iterations is what decrypting with algorithm derives: the PKCS #12 PBE derives a key and an
// IV, each with the count; PBES2 derives its key once with PBKDF2.
func iterations(algorithm pkix.AlgorithmIdentifier) int {
	switch a := algorithm.Algorithm; {
	case a.Equal(oidPBEWithSHA3DES), a.Equal(oidPBEWithSHARC2128), a.Equal(oidPBEWithSHARC240):
		var p pbeParams
		if unmarshal(algorithm.Parameters.FullBytes, &p) != nil {
			return 0 // refused by the decoder before it derives
		}
		return add(p.Iterations, p.Iterations)
	case a.Equal(oidPBES2):
		return pbkdf2Iterations(algorithm.Parameters.FullBytes)
	}
	return 0
}

// pbkdf2Iterations reads the count of PBES2 or PBMAC1 parameters whose KDF is PBKDF2.
func pbkdf2Iterations(params []byte) int {
	var p pbes2Params
	var kdf pbkdf2Params
	if unmarshal(params, &p) != nil || !p.KDF.Algorithm.Equal(oidPBKDF2) || unmarshal(p.KDF.Parameters.FullBytes, &kdf) != nil {
		return 0
	}
	return kdf.Iterations
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
