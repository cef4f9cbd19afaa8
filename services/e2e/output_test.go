package e2e

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// line is one line of the script's standard output and when the test read it.
type line struct {
	at   time.Time
	text string
}

// output collects the script's standard output. The lines are kept, not consumed from a
// channel, because the test waits for several jobs at once whose deliveries interleave, and
// the failure report shows them all.
type output struct {
	mu      sync.Mutex
	lines   []line
	changed chan struct{} // closed and replaced whenever a line arrives or the output ends
	ended   bool
	eof     chan struct{} // closed at EOF
}

func newOutput() *output {
	return &output{changed: make(chan struct{}), eof: make(chan struct{})}
}

func (o *output) add(l line) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, l)
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	close(o.changed)
	o.changed = make(chan struct{})
	close(o.eof)
}

// read copies the script's standard output into o line by line until EOF.
func (o *output) read(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		o.add(line{at: time.Now(), text: sc.Text()})
	}
	o.close()
}

// snapshot returns the lines so far, whether the output ended and a channel closed at the
// next change.
func (o *output) snapshot() ([]line, bool, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lines[:len(o.lines):len(o.lines)], o.ended, o.changed
}

// waitFor waits until done holds for the lines so far, and returns them. It fails the test
// when the output ends first or after timeout.
func (o *output) waitFor(t *testing.T, timeout time.Duration, what string, done func([]line) bool) []line {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		lines, ended, changed := o.snapshot()
		if done(lines) {
			return lines
		}
		if ended {
			t.Fatalf("run.sh's output ended while waiting for %s", what)
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited %s for %s", timeout, what)
		}
	}
}

func (o *output) String() string {
	lines, _, _ := o.snapshot()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// delivery is a request the example target printed (services/target).
type delivery struct {
	at              time.Time // the target's clock, whole seconds
	status          int
	method, path    string
	collection, job string
	expected        string // x-ms-scheduler-expected-execution-time
	tag, request    string // execution tag, client request id
	body            string
	expectedTime    time.Time // expected, parsed
}

// targetLine is the target's format:
// "%s %d %s %s job=%s/%s expected=%s tag=%s request=%s body=%q".
var targetLine = regexp.MustCompile(`^(\S+) (\d{3}) (\S+) (\S+) job=([^/ ]*)/(\S*) expected=(\S*) tag=(\S*) request=(\S*) body=(".*")$`)

// parseDelivery reads a target line; ok is false for any other line.
func parseDelivery(l line) (delivery, bool) {
	m := targetLine.FindStringSubmatch(l.text)
	if m == nil {
		return delivery{}, false
	}
	at, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		return delivery{}, false
	}
	status, _ := strconv.Atoi(m[2])
	body, err := strconv.Unquote(m[10])
	if err != nil {
		return delivery{}, false
	}
	d := delivery{at: at, status: status, method: m[3], path: m[4], collection: m[5], job: m[6],
		expected: m[7], tag: m[8], request: m[9], body: body}
	d.expectedTime, _ = time.Parse(time.RFC3339, d.expected)
	return d, true
}

// deliveriesOf returns the target's deliveries for one job, in the order it printed them.
func deliveriesOf(lines []line, collection, job string) []delivery {
	var out []delivery
	for _, l := range lines {
		if d, ok := parseDelivery(l); ok && d.collection == collection && d.job == job {
			out = append(out, d)
		}
	}
	return out
}

// waitDeliveries waits until the target has printed n deliveries of a job and returns them.
func (o *output) waitDeliveries(t *testing.T, timeout time.Duration, collection, job string, n int) []delivery {
	t.Helper()
	lines := o.waitFor(t, timeout, strconv.Itoa(n)+" deliveries of "+collection+"/"+job, func(lines []line) bool {
		return len(deliveriesOf(lines, collection, job)) >= n
	})
	return deliveriesOf(lines, collection, job)
}

func TestParseDelivery(t *testing.T) {
	tests := []struct {
		text string
		ok   bool
		want delivery
	}{
		{
			text: `2026-05-01T10:00:02Z 500 POST /fail/e2e job=e2e/failing expected=2026-05-01T10:00:00Z tag=abc request=r-1 body="x \"y\""`,
			ok:   true,
			want: delivery{status: 500, method: "POST", path: "/fail/e2e", collection: "e2e", job: "failing",
				expected: "2026-05-01T10:00:00Z", tag: "abc", request: "r-1", body: `x "y"`},
		},
		{
			text: `2026-05-01T10:00:02Z 200 GET /x job=/ expected= tag= request= body=""`,
			ok:   true,
			want: delivery{status: 200, method: "GET", path: "/x"},
		},
		{text: "target listening on http://127.0.0.1:1 (paths under /fail/ answer 500)"},
		{text: "\x1b[1m==> stopping\x1b[0m"},
	}
	for _, tt := range tests {
		got, ok := parseDelivery(line{text: tt.text})
		if ok != tt.ok {
			t.Errorf("parseDelivery(%q) ok = %v, want %v", tt.text, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		got.at, got.expectedTime = time.Time{}, time.Time{}
		if got != tt.want {
			t.Errorf("parseDelivery(%q) = %+v, want %+v", tt.text, got, tt.want)
		}
	}
}
