package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// The access file is read again when it changes: a token taken out of it is refused from the
// next request on, and one put in is accepted, without a restart; a file that does not read
// (a syntax error mid-edit) is logged and the grants read before stay. Read once at start, a
// leaked token stayed good on every gateway until each was restarted.
func TestGatewayFollowsItsAccessFile(t *testing.T) {
	g := startGateway(t, nil)
	status := func(token string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+g.addr+"/subscriptions/s1/providers/Microsoft.Scheduler?api-version=2016-03-01", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("first"); got != http.StatusOK {
		t.Fatalf("the token of the access file: %d, want 200", got)
	}
	writeAccess(t, g.access, "second")
	if first, second := status("first"), status("second"); first != http.StatusUnauthorized || second != http.StatusOK {
		t.Fatalf("after the token was replaced in the file: the old one %d (want 401), the new one %d (want 200)", first, second)
	}
	if err := os.WriteFile(g.access, []byte(`{"tokens": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := status("second"); got != http.StatusOK {
		t.Fatalf("with the file half written, the token read before: %d, want 200", got)
	}
	if !strings.Contains(g.logs.String(), "the access file changed on disk and cannot be read") {
		t.Errorf("no word of the file that could not be read in:\n%s", g.logs.String())
	}
}
