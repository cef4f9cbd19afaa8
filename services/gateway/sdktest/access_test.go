package sdktest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Who may call: every refusal in the ARM error shape, a valid token let in.
func TestAccess(t *testing.T) {
	s := startStack(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const sub1 = "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections"
	const sub2 = "/subscriptions/sub-2/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections"
	const version = "?api-version=2016-03-01"
	now := time.Now()
	cases := []struct {
		name, method, path, token string
		status                    int
		code, says                string
	}{
		{"no token", "GET", sub1 + version, "", 401, "AuthenticationFailed", "missing"},
		{"not a bearer token", "GET", sub1 + version, "Basic dXNlcjpwdw==", 401, "AuthenticationFailed", "missing"},
		{"unknown static token", "GET", sub1 + version, "Bearer nope", 401, "InvalidAuthenticationToken", "invalid"},
		{"bad signature", "GET", sub1 + version, "Bearer " + s.issuer.token(t, "alice", now.Add(time.Hour), other), 401, "InvalidAuthenticationToken", "signature"},
		{"expired", "GET", sub1 + version, "Bearer " + s.issuer.token(t, "alice", now.Add(-time.Minute), nil), 401, "InvalidAuthenticationToken", "expired"},
		{"valid, nobody known", "GET", sub1 + version, "Bearer " + s.issuer.token(t, "mallory", now.Add(time.Hour), nil), 401, "InvalidAuthenticationToken", "grants nothing"},
		{"another subscription", "GET", sub2 + version, "Bearer " + s.issuer.token(t, "alice", now.Add(time.Hour), nil), 403, "AuthorizationFailed", "sub-2"},
		{"valid", "GET", sub1 + version, "Bearer " + s.issuer.token(t, "alice", now.Add(time.Hour), nil), 200, "", ""},
		{"static token", "GET", sub1 + version, "Bearer operator-token", 200, "", ""},
		{"static token, resource group outside its scope", "GET", sub2 + version, "Bearer operator-token", 403, "AuthorizationFailed", "sub-2"},
		{"static token, its resource group", "GET", strings.Replace(sub2, "/rg/", "/rg-x/", 1) + version, "Bearer operator-token", 200, "", ""},
		{"reader writes", "PUT", sub1 + "/c" + version, "Bearer reader-token", 403, "AuthorizationFailed", "reader"},
		{"reader reads", "GET", sub1 + version, "Bearer reader-token", 200, "", ""},
		{"no api-version", "GET", sub1, "Bearer operator-token", 400, "MissingApiVersionParameter", "api-version"},
		{"an older api-version", "GET", sub1 + "?api-version=2016-01-01", "Bearer operator-token", 400, "InvalidApiVersionParameter", "2016-03-01"},
		{"the preview api-version", "GET", sub1 + "?api-version=2014-08-01-preview", "Bearer operator-token", 400, "InvalidApiVersionParameter", "2016-03-01"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, s.base+c.path, strings.NewReader(`{"location": "West US", "properties": {}}`))
			if err != nil {
				t.Fatal(err)
			}
			if c.token != "" {
				req.Header.Set("Authorization", c.token)
			}
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.code == "" {
				return
			}
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.says) {
				t.Errorf("answer %s, want code %s saying %q", body, c.code, c.says)
			}
			if strings.Contains(string(body), strings.TrimPrefix(c.token, "Bearer ")) && len(c.token) > 10 {
				t.Errorf("the answer repeats the token")
			}
		})
	}
	// Only /healthz answers without a token.
	resp, err := http.Get(strings.Replace(s.base, "https", "http", 1) + "/healthz")
	if err == nil && resp.StatusCode == 200 {
		t.Error("the API answers plain HTTP when it is configured for HTTPS")
	}
	if strings.Contains(s.gateway.Tail(), "operator-token") || strings.Contains(s.gateway.Tail(), "eyJ") {
		t.Error("the gateway logged a token")
	}
}
