package secrets

import (
	"errors"
	"fmt"

	"github.com/resched/resched/shared/job"
)

// ErrReserved is returned when a clear secret starts with Prefix: it would read as sealed.
var ErrReserved = errors.New("values starting with " + Prefix + " are reserved for encrypted secrets")

// FieldError names the field whose secret could not be sealed or opened. It never holds the
// value.
type FieldError struct {
	Path string // as job.Action.RewriteSecrets names it
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// aad binds a sealed value to its job and field. Names cannot hold "/" or NUL (job and
// collection names are letters, digits, '-' and '_'), so the parts cannot run into each other.
func aad(collection, jobName, path string) string {
	return "resched secret v1\x00" + collection + "/" + jobName + "\x00" + path
}

// SealAction replaces every secret of the job's action by its sealed form. It takes clear
// values only: one that already looks sealed came from a client, and is refused with
// ErrReserved, as it is by a nil keyring, which otherwise leaves the secrets clear.
func (k *Keyring) SealAction(a *job.Action, collection, jobName string) error {
	return a.RewriteSecrets(func(path, v string) (string, error) {
		if IsSealed(v) {
			return "", &FieldError{path, ErrReserved}
		}
		if k == nil {
			return v, nil
		}
		s, err := k.Seal(v, aad(collection, jobName, path))
		if err != nil {
			return "", &FieldError{path, err}
		}
		return s, nil
	})
}

// OpenAction replaces every sealed secret of the job's action by its clear value; a clear
// one (stored before keys were configured) stays as it is.
func (k *Keyring) OpenAction(a *job.Action, collection, jobName string) error {
	return a.RewriteSecrets(func(path, v string) (string, error) {
		if !IsSealed(v) {
			return v, nil
		}
		clear, err := k.Open(v, aad(collection, jobName, path))
		if err != nil {
			return "", &FieldError{path, err}
		}
		return clear, nil
	})
}

// Stale reports whether re-sealing the action would change how its secrets rest: one is
// clear while a key is configured, or sealed with a key other than the newest.
func (k *Keyring) Stale(a *job.Action) bool {
	stale := false
	_ = a.RewriteSecrets(func(_, v string) (string, error) {
		if k != nil && KeyOf(v) != k.Newest() {
			stale = true
		}
		return v, nil
	})
	return stale
}

// Describe says, for a log line at start, how secrets will rest.
func (k *Keyring) Describe() string {
	if k == nil {
		return "no secret keys: job secrets rest in clear in Redis and on the due stream"
	}
	return fmt.Sprintf("job secrets are sealed with key %q (AES-256-GCM); %d key(s) open them", k.Newest(), len(k.ids))
}
