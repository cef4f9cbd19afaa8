// Package secrets seals the secret fields of a job's action (passwords, PFX blobs, OAuth
// secrets, SAS tokens and keys, the Authorization header) so that they rest encrypted in Redis
// and travel encrypted on the due stream: the planner seals them when it stores a definition,
// and only a worker holding the key opens them, in memory, to deliver.
//
// The cipher is AES-256-GCM from the standard library, with a random 96-bit nonce per value.
// A sealed value is text in the field's own place:
//
//	rsenc1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>
//
// and it is bound, as additional authenticated data, to the job and the field it belongs to:
// a sealed value copied into another job or another field does not open.
//
// Keys form a keyring, newest first: new values are sealed with the newest, and every key of
// the ring opens what it sealed, so a key is rotated by putting a new one in front, re-sealing
// (planner -reencrypt), then removing the old one.
package secrets
