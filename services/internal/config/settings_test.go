package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReadsVariablesFromFiles(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "password")
	if err := os.WriteFile(secret, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var password, other, keysFile string
	settings := []Setting{
		Define("password", "password", "X_PASSWORD", "", OptionalText(&password, func(string) error { return nil })),
		Define("other", "other", "X_OTHER", "", OptionalText(&other, func(string) error { return nil })),
		// A setting whose variable is another's X_FILE keeps its own meaning.
		Define("keys", "keys", "X_KEYS", "", OptionalText(new(string), func(string) error { return nil })),
		Define("keys file", "keys-file", "X_KEYS_FILE", "", OptionalText(&keysFile, func(string) error { return nil })),
	}
	env := map[string]string{"X_PASSWORD_FILE": secret, "X_OTHER": "direct", "X_OTHER_FILE": secret, "X_KEYS_FILE": secret}
	problems, err := Parse("test", settings, nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	if password != "from-a-file" || other != "direct" || keysFile != secret {
		t.Errorf("password %q other %q keys file %q", password, other, keysFile)
	}

	env = map[string]string{"X_PASSWORD_FILE": filepath.Join(dir, "missing")}
	problems, _ = Parse("test", settings, nil, func(k string) string { return env[k] }, io.Discard)
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "X_PASSWORD_FILE") {
		t.Errorf("a missing file: %v", problems)
	}
}

func TestBoolFlagsStandAlone(t *testing.T) {
	var b bool
	settings := []Setting{Define("switch", "switch", "X_SWITCH", "", Bool(&b))}
	if problems, err := Parse("test", settings, []string{"-switch"}, func(string) string { return "" }, io.Discard); err != nil || len(problems) > 0 || !b {
		t.Errorf("-switch: %v %v %v", b, err, problems)
	}
	b = false
	if problems, err := Parse("test", settings, nil, func(string) string { return "true" }, io.Discard); err != nil || len(problems) > 0 || !b {
		t.Errorf("X_SWITCH=true: %v %v %v", b, err, problems)
	}
}

func TestASecretKeepsTheFileItWasReadFrom(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(secret, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		env       map[string]string
		args      []string
		want, src string
	}{
		{"from a file", map[string]string{"X_PASSWORD_FILE": secret}, nil, "from-a-file", secret},
		{"the variable over the file", map[string]string{"X_PASSWORD": "direct", "X_PASSWORD_FILE": secret}, nil, "direct", ""},
		{"the flag over the file", map[string]string{"X_PASSWORD_FILE": secret}, []string{"-password", "flag"}, "flag", ""},
		{"neither", nil, nil, "", ""},
	} {
		var password, file string
		settings := []Setting{Define("password", "password", "X_PASSWORD", "", Secret(&password, &file, func(string) error { return nil }))}
		problems, err := Parse("test", settings, c.args, func(k string) string { return c.env[k] }, io.Discard)
		if err != nil || len(problems) > 0 {
			t.Fatal(c.name, err, problems)
		}
		if password != c.want || file != c.src {
			t.Errorf("%s: password %q from %q, want %q from %q", c.name, password, file, c.want, c.src)
		}
	}
}
