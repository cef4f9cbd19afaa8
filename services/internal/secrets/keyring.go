package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Prefix starts every sealed value. Clear secrets may not start with it, so a sealed value is
// never mistaken for a clear one, nor the other way round.
const Prefix = "rsenc1:"

// KeySize is the length of a key: AES-256.
const KeySize = 32

// ErrUnknownKey is returned when a value was sealed with a key the keyring does not have.
var ErrUnknownKey = errors.New("sealed with a key this process does not have")

// ErrNoKeys is returned when a value is sealed but no keyring is configured at all.
var ErrNoKeys = errors.New("sealed, and no secret keys are configured")

var keyID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Keyring holds the keys, newest first. A nil *Keyring holds none: it seals nothing and
// opens nothing.
type Keyring struct {
	ids   []string
	aeads map[string]cipher.AEAD
}

// ParseKeys reads a keyring written as "id=base64key" entries, newest first, separated by
// commas, spaces or new lines; a line starting with # is a comment. A key is 32 random bytes
// in standard or URL base64 (openssl rand -base64 32).
func ParseKeys(text string) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, entry := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			if err := k.add(entry); err != nil {
				return nil, err
			}
		}
	}
	if len(k.ids) == 0 {
		return nil, errors.New("no keys: write them as id=base64key, newest first")
	}
	return k, nil
}

func (k *Keyring) add(entry string) error {
	id, b64, ok := strings.Cut(entry, "=")
	if !ok || !keyID.MatchString(id) {
		return fmt.Errorf("key entry %d: want id=base64key with an id of letters, digits, '.', '_' or '-'", len(k.ids)+1)
	}
	if _, dup := k.aeads[id]; dup {
		return fmt.Errorf("key %q: the id appears twice", id)
	}
	raw, err := decodeKey(b64)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	k.ids = append(k.ids, id)
	k.aeads[id] = aead
	return nil
}

// decodeKey reads the base64 of a key; the error never shows the key.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	raw, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		raw, err = base64.RawURLEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, errors.New("not base64")
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%d bytes; a key is %d random bytes (openssl rand -base64 32)", len(raw), KeySize)
	}
	return raw, nil
}

// Newest is the id of the key new values are sealed with ("" for a nil keyring).
func (k *Keyring) Newest() string {
	if k == nil {
		return ""
	}
	return k.ids[0]
}

// IDs are the ids of the keys, newest first.
func (k *Keyring) IDs() []string {
	if k == nil {
		return nil
	}
	return append([]string(nil), k.ids...)
}

// Seal encrypts a clear value with the newest key, bound to aad.
func (k *Keyring) Seal(clear, aad string) (string, error) {
	id := k.ids[0]
	aead := k.aeads[id]
	buf := make([]byte, aead.NonceSize(), aead.NonceSize()+len(clear)+aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("seal: random nonce: %w", err)
	}
	buf = aead.Seal(buf, buf, []byte(clear), []byte(aad))
	return Prefix + id + ":" + base64.RawURLEncoding.EncodeToString(buf), nil
}

// Open decrypts a sealed value bound to aad. A value that is not sealed is an error: the
// caller decides with IsSealed what a clear value means.
func (k *Keyring) Open(sealed, aad string) (string, error) {
	id, payload, err := split(sealed)
	if err != nil {
		return "", err
	}
	if k == nil {
		return "", fmt.Errorf("key %q: %w", id, ErrNoKeys)
	}
	aead, ok := k.aeads[id]
	if !ok {
		return "", fmt.Errorf("key %q: %w (it has %s)", id, ErrUnknownKey, strings.Join(k.ids, ", "))
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", fmt.Errorf("key %q: the sealed value is damaged", id)
	}
	clear, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("key %q: does not decrypt: the value was altered or belongs to another job or field", id)
	}
	return string(clear), nil
}

// IsSealed reports whether a value is in the sealed form.
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// KeyOf returns the id of the key a value was sealed with ("" for a clear value).
func KeyOf(v string) string {
	id, _, err := split(v)
	if err != nil {
		return ""
	}
	return id
}

func split(v string) (id, payload string, err error) {
	rest, ok := strings.CutPrefix(v, Prefix)
	if !ok {
		return "", "", errors.New("not a sealed value")
	}
	id, payload, ok = strings.Cut(rest, ":")
	if !ok || id == "" {
		return "", "", errors.New("a sealed value without its key id")
	}
	return id, payload, nil
}
