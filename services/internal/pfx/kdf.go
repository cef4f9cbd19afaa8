package pfx

import "crypto/sha1"

// deriveKey is the key derivation of the PKCS #12 PBE (RFC 7292, appendix B.2) with SHA-1, the
// only hash its ciphers use: size bytes of purpose id (1 a key, 2 an IV), from the salt and the
// password (a zero-terminated BMPString). Written here because no library exports it; it only
// opens an encrypted safe to count what is inside (checkWork), the decoder derives its own.
func deriveKey(salt, password []byte, iterations int, id byte, size int) []byte {
	const u, v = sha1.Size, 64 // the hash's output and block sizes
	d := make([]byte, v)
	for i := range d {
		d[i] = id
	}
	in := append(repeatTo(salt, v), repeatTo(password, v)...)
	out := make([]byte, 0, size+u)
	b := make([]byte, v)
	for len(out) < size {
		h := sha1.New()
		h.Write(d)
		h.Write(in)
		a := h.Sum(nil)
		for range iterations - 1 {
			sum := sha1.Sum(a)
			a = sum[:]
		}
		out = append(out, a...)
		for i := range b {
			b[i] = a[i%u]
		}
		for j := 0; j < len(in); j += v { // each v-byte block of in becomes in + b + 1
			carry := 1
			for k := v - 1; k >= 0; k-- {
				sum := int(in[j+k]) + int(b[k]) + carry
				in[j+k], carry = byte(sum), sum>>8
			}
		}
	}
	return out[:size]
}

// repeatTo repeats p to the next multiple of v bytes (nothing for an empty p).
func repeatTo(p []byte, v int) []byte {
	n := (len(p) + v - 1) / v * v
	out := make([]byte, n)
	for i := range out {
		out[i] = p[i%len(p)]
	}
	return out
}
