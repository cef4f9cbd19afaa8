package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHandlerPrintsDeliveriesAndFailsUnderFail(t *testing.T) {
	var out bytes.Buffer
	at := time.Date(2026, 1, 2, 3, 4, 5, 7*int(time.Millisecond), time.UTC)
	srv := httptest.NewServer(handler(&out, func() time.Time { return at }))
	defer srv.Close()
	for path, want := range map[string]int{"/ping": 200, "/fail/now": 500} {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader("hello"))
		req.Header.Set("x-ms-scheduler-jobid", "j")
		req.Header.Set("x-ms-scheduler-jobcollectionid", "c")
		req.Header.Set("x-ms-scheduler-execution-tag", "abc")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s answered %d, want %d", path, resp.StatusCode, want)
		}
	}
	for _, want := range []string{"2026-01-02T03:04:05.007Z 200 POST /ping job=c/j", `tag=abc`, `body="hello"`, "500 POST /fail/now"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
