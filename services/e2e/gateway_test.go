package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkGateway: make run starts the gateway with a token of its own in the data directory, and
// the call the script prints answers with it (and not without it).
func checkGateway(t *testing.T, s *stack) {
	token, err := os.ReadFile(filepath.Join(s.data, "gateway-token"))
	if err != nil || len(token) < 20 {
		t.Fatalf("the gateway's token: %q, %v", token, err)
	}
	base := "http://" + s.addrs["gateway"] + "/subscriptions/local/resourceGroups/demo/providers/Microsoft.Scheduler/jobCollections"
	call := func(method, path, token, body string) (int, string) {
		req, err := http.NewRequest(method, base+path+"?api-version=2016-03-01", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := call("GET", "", "", ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", code)
	}
	if code, body := call("PUT", "/azure", string(token), `{"location": "local", "properties": {"sku": {"name": "Standard"}}}`); code != http.StatusCreated {
		t.Fatalf("create a collection: %d %s", code, body)
	}
	if code, body := call("GET", "", string(token), ""); code != http.StatusOK ||
		!strings.Contains(body, `"id":"/subscriptions/local/resourceGroups/demo/providers/Microsoft.Scheduler/jobCollections/azure"`) {
		t.Errorf("list: %d %s", code, body)
	}
}
