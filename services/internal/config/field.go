package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// The constructors of the setting kinds. Each returns the Field that reads the text into *p.

// Text is a non-empty string passed through check.
func Text(p *string, check func(string) error) Field { return textField{p, check} }

// OptionalText is a string whose empty value means "off"; anything else passes through check.
func OptionalText(p *string, check func(string) error) Field {
	return optionalTextField{textField{p, check}}
}

// Secret is an OptionalText (a password, a token) that remembers where it was read: given as
// the variable X_FILE (a mounted Secret), *file is that path, so that the service can read the
// file again when it is rotated in place; given otherwise, *file is empty.
func Secret(p, file *string, check func(string) error) Field {
	return secretField{optionalTextField{textField{p, check}}, file}
}

// Level is a slog level: debug, info, warn or error.
func Level(p *slog.Level) Field { return levelField{p} }

// Duration is a time.ParseDuration text of at least min.
func Duration(p *time.Duration, min time.Duration) Field { return durationField{p, min} }

// Int is a whole number from min to max.
func Int(p *int, min, max int) Field { return intField{p, min, max} }

// IntOrAuto is a whole number from min to max, or the word auto, read as Auto.
func IntOrAuto(p *int, min, max int) Field { return autoIntField{intField{p, min, max}} }

// Auto is what IntOrAuto reads the word auto as.
const Auto = -1

// Bool is true or false.
func Bool(p *bool) Field { return boolField{p} }

// Field reads one setting from its text (a flag or an environment variable) into a service's
// Config, and prints its default for -h.
type Field interface {
	String() string
	Set(string) error
}

// textField is a string with a check.
type textField struct {
	p     *string
	check func(string) error
}

func (f textField) String() string { return *f.p }

func (f textField) Set(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	if err := f.check(v); err != nil {
		return err
	}
	*f.p = v
	return nil
}

// optionalTextField is a text setting whose empty value means "off".
type optionalTextField struct{ textField }

func (f optionalTextField) Set(v string) error {
	if v == "" {
		*f.p = ""
		return nil
	}
	return f.textField.Set(v)
}

// secretField is an optional text whose file, when it came from one, is kept (fileSource).
type secretField struct {
	optionalTextField
	file *string
}

func (f secretField) setFile(path string) { *f.file = path }

// fileSource is a Field that keeps the path of the X_FILE it was read from.
type fileSource interface{ setFile(path string) }

// levelField is a slog level by name.
type levelField struct{ p *slog.Level }

func (f levelField) String() string { return strings.ToLower(f.p.String()) }

func (f levelField) Set(v string) error {
	if err := f.p.UnmarshalText([]byte(v)); err != nil {
		return fmt.Errorf("%q is not debug, info, warn or error", v)
	}
	return nil
}

// durationField is a Go duration ("500ms", "30s", "1h") of at least min.
type durationField struct {
	p   *time.Duration
	min time.Duration
}

func (f durationField) String() string { return FormatDuration(*f.p) }

func (f durationField) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 500ms, 30s, 10m or 1h", v)
	}
	if d < f.min {
		return fmt.Errorf("%s is shorter than the minimum of %s", v, FormatDuration(f.min))
	}
	*f.p = d
	return nil
}

// FormatDuration drops the zero minutes and seconds time.Duration prints: "1h", not "1h0m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// intField is a whole number from min to max.
type intField struct {
	p        *int
	min, max int
}

func (f intField) String() string { return strconv.Itoa(*f.p) }

func (f intField) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	if n < f.min || n > f.max {
		return fmt.Errorf("%d is not between %d and %d", n, f.min, f.max)
	}
	*f.p = n
	return nil
}

// autoIntField is an intField that also takes the word auto.
type autoIntField struct{ intField }

func (f autoIntField) String() string {
	if *f.p == Auto {
		return "auto"
	}
	return f.intField.String()
}

func (f autoIntField) Set(v string) error {
	if v == "auto" {
		*f.p = Auto
		return nil
	}
	if err := f.intField.Set(v); err != nil {
		return fmt.Errorf("%w, nor auto", err)
	}
	return nil
}

// boolField is true or false (also 1/0, t/f as strconv.ParseBool reads them).
type boolField struct{ p *bool }

func (f boolField) String() string { return strconv.FormatBool(*f.p) }

// IsBoolFlag lets the flag stand alone: -reencrypt means -reencrypt=true.
func (f boolField) IsBoolFlag() bool { return true }

func (f boolField) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*f.p = b
	return nil
}
