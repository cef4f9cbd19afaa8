package executor

import (
	"crypto/rand"
	"encoding/hex"
)

// NewRequestID returns a random (version 4) UUID in its text form, the x-ms-client-request-id
// of one attempt.
func NewRequestID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])  // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}
