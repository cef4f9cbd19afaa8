package secrets

import (
	"errors"
	"fmt"
	"os"

	"github.com/resched/resched/services/internal/config"
)

// Options say where a service finds its keyring.
type Options struct {
	Keys     string // the keyring itself (prefer the file: a flag shows in the process list)
	KeysFile string // a file holding the keyring, e.g. a mounted Kubernetes Secret
}

// Settings are -secret-keys-file (RESCHED_SECRET_KEYS_FILE) and -secret-keys
// (RESCHED_SECRET_KEYS).
func (o *Options) Settings() []config.Setting {
	return []config.Setting{
		config.Define("secret keys file", "secret-keys-file", "RESCHED_SECRET_KEYS_FILE",
			"file of the keys that seal job secrets: id=base64key lines, newest first", config.OptionalText(&o.KeysFile, checkFile)),
		config.Define("secret keys", "secret-keys", "RESCHED_SECRET_KEYS",
			"the keys that seal job secrets, id=base64key,…, newest first (prefer the file)", config.OptionalText(&o.Keys, checkKeys)),
	}
}

// Load reads the keyring: nil, and no error, when none is configured.
func (o Options) Load() (*Keyring, error) {
	switch {
	case o.Keys != "" && o.KeysFile != "":
		return nil, errors.New("secret keys: set either RESCHED_SECRET_KEYS or RESCHED_SECRET_KEYS_FILE, not both")
	case o.KeysFile != "":
		b, err := os.ReadFile(o.KeysFile)
		if err != nil {
			return nil, fmt.Errorf("secret keys file (-secret-keys-file, RESCHED_SECRET_KEYS_FILE): %w", err)
		}
		k, err := ParseKeys(string(b))
		if err != nil {
			return nil, fmt.Errorf("secret keys file %s: %w", o.KeysFile, err)
		}
		return k, nil
	case o.Keys != "":
		k, err := ParseKeys(o.Keys)
		if err != nil {
			return nil, fmt.Errorf("secret keys (-secret-keys, RESCHED_SECRET_KEYS): %w", err)
		}
		return k, nil
	}
	return nil, nil
}

func checkKeys(v string) error {
	_, err := ParseKeys(v)
	return err
}

func checkFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return checkKeys(string(b))
}
