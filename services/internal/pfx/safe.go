package pfx

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"hash"
)

var (
	oidHMACWithSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACWithSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC      = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC      = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC      = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

// The key sizes of the ciphers the decoder knows: the PKCS #12 PBE's and PBES2's.
var (
	pbeKeySizes = []oidSize{{oidPBEWithSHA3DES, 24}, {oidPBEWithSHARC2128, 16}, {oidPBEWithSHARC240, 5}}
	aesKeySizes = []oidSize{{oidAES128CBC, 16}, {oidAES192CBC, 24}, {oidAES256CBC, 32}}
)

type oidSize struct {
	oid  asn1.ObjectIdentifier
	size int
}

// keySize is the key size of algorithm a among sizes, 0 for one not among them.
func keySize(a asn1.ObjectIdentifier, sizes []oidSize) int {
	for _, s := range sizes {
		if a.Equal(s.oid) {
			return s.size
		}
	}
	return 0
}

// errUnreadable: the decoder refuses the safe's algorithm before deriving anything.
var errUnreadable = errors.New("an algorithm the decoder does not know")

// openSafe decrypts an encrypted safe's content with the algorithms the decoder knows, so that
// checkWork can count the key bags inside before the decoder derives their keys (its own
// derivation is counted first). A safe that does not open here would not open in the decoder
// either: the same password, the same padding check.
func openSafe(algorithm pkix.AlgorithmIdentifier, data []byte, password string) ([]byte, error) {
	if algorithm.Algorithm.Equal(oidPBES2) {
		block, iv, err := pbes2Cipher(algorithm.Parameters.FullBytes, password)
		if err != nil {
			return nil, err
		}
		return cbcOpen(block, iv, data)
	}
	size := keySize(algorithm.Algorithm, pbeKeySizes)
	var p pbeParams
	if size == 0 || unmarshal(algorithm.Parameters.FullBytes, &p) != nil {
		return nil, errUnreadable
	}
	var err error
	for _, pw := range pkcs12Passwords(password) {
		key, iv := deriveKey(p.Salt, pw, p.Iterations, 1, size), deriveKey(p.Salt, pw, p.Iterations, 2, 8)
		var block cipher.Block
		if size == 24 {
			if block, err = des.NewTripleDESCipher(key); err != nil {
				return nil, err
			}
		} else {
			block = newRC2(key)
		}
		var plain []byte
		if plain, err = cbcOpen(block, iv, data); err == nil {
			return plain, nil
		}
	}
	return nil, err
}

// pkcs12Passwords are the encodings the decoder may have settled on: a zero-terminated
// BMPString, and for an empty password also no bytes at all (tried when the first fails the MAC).
func pkcs12Passwords(password string) [][]byte {
	pw := make([]byte, 0, 2*len(password)+2)
	for _, r := range password { // the decoder refuses a password beyond the BMP before this
		pw = append(pw, byte(r>>8), byte(r))
	}
	pw = append(pw, 0, 0)
	if password == "" {
		return [][]byte{pw, nil}
	}
	return [][]byte{pw}
}

// pbes2Cipher is PBES2's AES with a key from PBKDF2 (RFC 8018), the password in UTF-8 as the
// decoder passes it (its bytes that are not UTF-8 each replaced).
func pbes2Cipher(params []byte, password string) (cipher.Block, []byte, error) {
	p, kdf, ok := readPBES2(params)
	if !ok || kdf.Salt.Tag != asn1.TagOctetString {
		return nil, nil, errUnreadable
	}
	var prf func() hash.Hash
	switch a := kdf.PRF.Algorithm; {
	case a == nil, a.Equal(oidHMACWithSHA1):
		prf = sha1.New
	case a.Equal(oidHMACWithSHA256):
		prf = sha256.New
	case a.Equal(oidHMACWithSHA512):
		prf = sha512.New
	default:
		return nil, nil, errUnreadable
	}
	size := keySize(p.Scheme.Algorithm, aesKeySizes)
	if size == 0 {
		return nil, nil, errUnreadable
	}
	key, err := pbkdf2.Key(prf, string([]rune(password)), kdf.Salt.Bytes, max(kdf.Iterations, 1), size)
	if err != nil {
		return nil, nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, nil, err
	}
	iv := p.Scheme.Parameters.Bytes
	if len(iv) != block.BlockSize() {
		return nil, nil, errUnreadable
	}
	return block, iv, nil
}

// errWrongPassword: a safe's content is not what the password would have encrypted.
var errWrongPassword = errors.New("its encrypted content does not open with this password")

// cbcOpen decrypts data in CBC mode and removes its PKCS #7 padding.
func cbcOpen(block cipher.Block, iv, data []byte) ([]byte, error) {
	if len(data) == 0 || len(data)%block.BlockSize() != 0 {
		return nil, errUnreadable
	}
	plain := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, data)
	n := int(plain[len(plain)-1])
	if n == 0 || n > block.BlockSize() || !bytes.Equal(plain[len(plain)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
		return nil, errWrongPassword
	}
	return plain[:len(plain)-n], nil
}
