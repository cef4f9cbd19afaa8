// Package reload keeps a value read from files and reads them again when they change, so that
// what an operator renews on disk (a certificate, an access file with a token revoked, a
// Kubernetes Secret refreshed in its mount) takes effect without a restart. A change is seen
// by the files' modification times and sizes, looked at on each Get: a stat a file, no
// watcher goroutine, nothing to stop.
package reload

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
)

// Value is what read made of the files, read again on Get when they have changed since. Its
// methods are safe for concurrent use.
type Value[T any] struct {
	paths   []string
	read    func() (T, error)
	changed func(error)
	mu      sync.Mutex
	current T
	loaded  []stamp // the files as they were when current was read
	failed  []stamp // the files as they were when reading them last failed (nil: never)
}

// stamp is what tells a file changed. A mounted Secret is swapped whole (a symbolic link to a
// new directory), which os.Stat follows.
type stamp struct{ modNanos, size int64 }

// New reads the value now (an error fails it: a bad file at start is the operator's to fix).
// changed (nil: none) hears of each later change: nil when it was read again, the error when
// it could not be (a certificate written before its key, a file half written, a syntax
// error); the value read before is then kept until the files change again.
func New[T any](read func() (T, error), changed func(error), paths ...string) (*Value[T], error) {
	v := &Value[T]{paths: paths, read: read, changed: changed}
	st, err := v.stat()
	if err != nil {
		return nil, err
	}
	if v.current, err = read(); err != nil {
		return nil, err
	}
	v.loaded = st
	return v, nil
}

// NewText is the text of one file (a password, a token in a mounted Secret), without the line
// ending it may have, as config reads a variable's X_FILE. An empty file is an error, so a
// Secret swapped while half written keeps the text read before.
func NewText(path string, changed func(error)) (*Value[string], error) {
	return New(func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if text := strings.TrimRight(string(b), "\r\n"); text != "" {
			return text, nil
		}
		return "", fmt.Errorf("%s is empty", path)
	}, changed, path)
}

// Get is the value, read again first when its files changed.
func (v *Value[T]) Get() T {
	st, err := v.stat()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil || slices.Equal(st, v.loaded) || slices.Equal(st, v.failed) {
		return v.current // a file missing for a moment while it is replaced: the last value
	}
	next, err := v.read()
	if err != nil {
		v.failed = st
	} else {
		v.current, v.loaded = next, st
	}
	if v.changed != nil {
		v.changed(err)
	}
	return v.current
}

func (v *Value[T]) stat() ([]stamp, error) {
	st := make([]stamp, len(v.paths))
	for i, p := range v.paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		st[i] = stamp{modNanos: info.ModTime().UnixNano(), size: info.Size()}
	}
	return st, nil
}

// Logged is a changed callback that logs each change of what (nil with a nil logger): read
// again at info, not readable at warn, the error named.
func Logged(logger *slog.Logger, what string) func(error) {
	if logger == nil {
		return nil
	}
	return func(err error) {
		if err != nil {
			logger.Warn(what+" changed on disk and cannot be read; what was read before is used until it changes again", "error", err)
			return
		}
		logger.Info(what + " changed on disk and was read again")
	}
}
