// Command target is the example HTTP target of `make run` and docker compose: it prints one line
// per request it receives, with the scheduler's headers, so a newcomer sees deliveries arrive.
// A path under /fail/ answers 500, to show retries and the error action.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("target", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("TARGET_ADDR", ":8080"), "listen address (env TARGET_ADDR)")
	quiet := fs.Bool("quiet", false, "print nothing per request (for load tests)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "target:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := stdout
	if *quiet {
		out = io.Discard
	}
	srv := &http.Server{Handler: handler(out, time.Now), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "target listening on http://%s (paths under /fail/ answer 500)\n", l.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "target:", err)
		return 1
	}
	return 0
}

// arrivalLayout is RFC 3339 with milliseconds: the expected time of a job put to run now has
// them, and a line must show its request arriving after it, not in the same second.
const arrivalLayout = "2006-01-02T15:04:05.000Z07:00"

// handler prints each request on one line and answers 200, or 500 under /fail/.
func handler(out io.Writer, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		status := http.StatusOK
		if strings.HasPrefix(r.URL.Path, "/fail/") {
			status = http.StatusInternalServerError
		}
		h := r.Header
		fmt.Fprintf(out, "%s %d %s %s job=%s/%s expected=%s tag=%s request=%s body=%q\n",
			now().UTC().Format(arrivalLayout), status, r.Method, r.URL.Path,
			h.Get("x-ms-scheduler-jobcollectionid"), h.Get("x-ms-scheduler-jobid"),
			h.Get("x-ms-scheduler-expected-execution-time"), h.Get("x-ms-scheduler-execution-tag"),
			h.Get("x-ms-client-request-id"), body)
		w.WriteHeader(status)
		fmt.Fprintf(w, "%d %s\n", status, http.StatusText(status))
	})
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
