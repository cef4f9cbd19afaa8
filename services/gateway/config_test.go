package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigRefusesWhatCannotWork(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "access.json")
	if err := os.WriteFile(good, []byte(`{"tokens": [{"name": "t", "token": "x", "role": "operator", "scopes": ["*"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tokens": [{"name": "t", "token": "x", "role": "admin", "scopes": ["/subs/x"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // "" accepted
	}{
		{"no access file", map[string]string{}, "RESCHED_GATEWAY_ACCESS_FILE"},
		{"an access file", map[string]string{"RESCHED_GATEWAY_ACCESS_FILE": good}, ""},
		{"a bad role and scope", map[string]string{"RESCHED_GATEWAY_ACCESS_FILE": bad}, `role "admin"`},
		{"a certificate without its key", map[string]string{"RESCHED_GATEWAY_ACCESS_FILE": good, "RESCHED_GATEWAY_TLS_CERT": "c.pem"}, "both or neither"},
		{"an issuer that is not a URL", map[string]string{"RESCHED_GATEWAY_ACCESS_FILE": good, "RESCHED_GATEWAY_OIDC_ISSUER": "login"}, "OIDC_ISSUER"},
		{"an issuer without an audience", map[string]string{"RESCHED_GATEWAY_ACCESS_FILE": good, "RESCHED_GATEWAY_OIDC_ISSUER": "https://login.example"}, "RESCHED_GATEWAY_OIDC_AUDIENCE) is required"},
		{"an issuer with an audience", map[string]string{"RESCHED_GATEWAY_ACCESS_FILE": good, "RESCHED_GATEWAY_OIDC_ISSUER": "https://login.example", "RESCHED_GATEWAY_OIDC_AUDIENCE": "api://resched"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig(nil, env(c.env), io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one naming %s", err, c.want)
			}
		})
	}
}
