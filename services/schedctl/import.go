package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// bulkLimit and bulkBytes bound one bulk request: the planner's limit, and well under NATS's
// largest payload (1 MiB by default).
const (
	bulkLimit = 1000
	bulkBytes = 768 << 10
)

// jobImport loads many jobs at once: an Azure export or a folder of definitions, in bulk
// requests spread over the planners, with a progress line, a summary of the refusals and the
// path of each, and a journal so that the same command run again goes on where it stopped.
func jobImport(inv *invocation, args []string) error {
	journalPath := inv.fs.String("journal", "schedctl-import.journal", "`file` recording the jobs stored, to resume an import that stopped")
	batch := inv.fs.Int("batch", 500, "jobs per request (at most 1000)")
	parallel := inv.fs.Int("parallel", 8, "requests in flight at once")
	createOnly := inv.fs.Bool("create-only", false, "leave existing jobs alone (refused as conflicts) instead of replacing them")
	pos, err := inv.parse(args, 1, 1<<20)
	if err != nil {
		return err
	}
	if *batch < 1 || *batch > bulkLimit || *parallel < 1 {
		return usagef("--batch must be 1 to %d and --parallel 1 or more", bulkLimit)
	}
	collection, paths := "", pos
	if _, err := os.Stat(pos[0]); err != nil && len(pos) > 1 {
		collection, paths = pos[0], pos[1:] // the first argument is not a path: the collection
	}
	identity, err := importIdentity(collection, paths)
	if err != nil {
		return err
	}
	j, err := openJournal(*journalPath, identity)
	if err != nil {
		return err
	}
	defer j.close()
	im := &importer{inv: inv, journal: j, createOnly: *createOnly, started: time.Now(), resumed: len(j.done)}
	batches := make(chan []importItem)
	var wg sync.WaitGroup
	for range *parallel {
		wg.Go(func() {
			for b := range batches {
				im.send(b)
			}
		})
	}
	pending := map[string][]importItem{}
	size := map[string]int{}
	flush := func(c string) {
		if len(pending[c]) > 0 {
			batches <- pending[c]
			pending[c], size[c] = nil, 0
		}
	}
	stopProgress := im.progress()
	readErr := readSources(paths, collection, func(it importItem) error {
		im.count(1)
		if j.done[it.key()] {
			im.skip()
			return nil
		}
		if im.stopped() {
			return errStopped
		}
		c := it.collection
		if len(pending[c]) == *batch || size[c]+len(it.resource) > bulkBytes {
			flush(c)
		}
		pending[c] = append(pending[c], it)
		size[c] += len(it.resource)
		return nil
	})
	for c := range pending {
		flush(c)
	}
	close(batches)
	wg.Wait()
	stopProgress()
	if readErr != nil && !errors.Is(readErr, errStopped) {
		return readErr
	}
	return im.summary(*journalPath)
}

var errStopped = errors.New("import stopped")

// importIdentity names an import by its collection and sources, for its journal.
func importIdentity(collection string, paths []string) (string, error) {
	var abs []string
	for _, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		abs = append(abs, a)
	}
	return strings.TrimSpace(collection + " " + strings.Join(abs, " ")), nil
}

// importer sends the batches and keeps the count.
type importer struct {
	inv        *invocation
	journal    *journal
	createOnly bool
	started    time.Time
	resumed    int // jobs the journal already had

	mu               sync.Mutex
	read, skipped    int
	created, updated int
	refused          []string // "collection/job (where): why"
	failure          error    // the planner could not be reached: the import stops
}

func (im *importer) count(n int) { im.mu.Lock(); im.read += n; im.mu.Unlock() }
func (im *importer) skip()       { im.mu.Lock(); im.skipped++; im.mu.Unlock() }

func (im *importer) stopped() bool {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.failure != nil
}

// bulkAnswer is the planner's answer to jobs.bulk.
type bulkAnswer struct {
	Value []struct {
		Name   string    `json:"name"`
		Status int       `json:"status"`
		Error  *apiError `json:"error"`
	} `json:"value"`
}

// send puts one batch, trying again a few times when no planner answers.
func (im *importer) send(items []importItem) {
	if im.stopped() {
		return
	}
	jobs := make([]json.RawMessage, len(items))
	for i, it := range items {
		jobs[i] = it.resource
	}
	body, _ := json.Marshal(map[string]any{"jobs": jobs})
	var headers map[string]string
	if im.createOnly {
		headers = map[string]string{headerIfNoneMatch: "*"}
	}
	var answer bulkAnswer
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		m, rerr := im.inv.requestMsg(body, headers, "jobs", "bulk", items[0].collection)
		if err = rerr; err == nil {
			err = json.Unmarshal(m.Data, &answer)
		}
		var api *apiError
		if err == nil || errors.As(err, &api) || isPermission(err) {
			break
		}
		time.Sleep(time.Duration(1<<attempt) * 500 * time.Millisecond)
	}
	if err == nil && len(answer.Value) != len(items) {
		err = fmt.Errorf("the planner answered %d results for %d jobs", len(answer.Value), len(items))
	}
	if again := im.tally(items, answer, err); len(again) > 0 {
		im.send(again)
	}
}

// tally counts a batch's answer and returns the jobs to send again: those the planner left
// unchecked, its request's time taken by the jobs before them (503 ServerBusy). It always
// checks a batch's first, so each batch sent again is smaller.
func (im *importer) tally(items []importItem, answer bulkAnswer, err error) []importItem {
	im.mu.Lock()
	defer im.mu.Unlock()
	if err != nil {
		if im.failure == nil {
			im.failure = err
		}
		return nil
	}
	var stored []string
	var again []importItem
	for i, r := range answer.Value {
		it := items[i]
		switch {
		case r.Status == 201:
			im.created++
		case r.Status == 200:
			im.updated++
		case r.Status == 503 && i > 0:
			again = append(again, it)
			continue
		default:
			im.refused = append(im.refused, refusal(it, r.Error))
			continue
		}
		stored = append(stored, it.key())
	}
	if jerr := im.journal.record(stored); jerr != nil && im.failure == nil {
		im.failure = jerr
	}
	return again
}

func isPermission(err error) bool {
	var p *permissionError
	return errors.As(err, &p)
}

// refusal says why the planner refused a job, with each problem's path.
func refusal(it importItem, e *apiError) string {
	if e == nil {
		return fmt.Sprintf("%s (%s): refused", it.key(), it.from)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s", it.key(), it.from, e.Message)
	for _, d := range e.Details {
		if d.Path != "" {
			fmt.Fprintf(&b, "; %s: %s", d.Path, d.Message)
		} else {
			fmt.Fprintf(&b, "; %s", d.Message)
		}
	}
	return b.String()
}

// progress prints where the import stands on standard error: a bar redrawn in place on a
// terminal, a line every few seconds otherwise. The returned function stops it.
func (im *importer) progress() func() {
	tty := isTerminal(im.inv.stderr)
	every := 3 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprint(im.inv.stderr, "\r"+im.line()+"\n")
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprint(im.inv.stderr, "\r"+im.line())
				} else {
					fmt.Fprintln(im.inv.stderr, im.line())
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// line is the progress: a bar of the jobs read so far that are stored or refused.
func (im *importer) line() string {
	im.mu.Lock()
	defer im.mu.Unlock()
	settled := im.created + im.updated + len(im.refused) + im.skipped
	const width = 30
	filled := 0
	if im.read > 0 {
		filled = min(width, width*settled/im.read)
	}
	rate := float64(im.created+im.updated) / max(time.Since(im.started).Seconds(), 0.001)
	return fmt.Sprintf("[%s%s] %d/%d jobs, %d refused, %.0f/s", strings.Repeat("#", filled), strings.Repeat(" ", width-filled),
		settled, im.read, len(im.refused), rate)
}

// summary prints what the import did; it fails when a job was refused or the import stopped.
func (im *importer) summary(journalPath string) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	took := time.Since(im.started).Round(100 * time.Millisecond)
	w := im.inv.stdout
	fmt.Fprintf(w, "imported %s in %s (%d created, %d replaced)", plural(im.created+im.updated, "job"), took, im.created, im.updated)
	if im.skipped > 0 {
		fmt.Fprintf(w, "; %d already imported by an earlier run", im.skipped)
	}
	fmt.Fprintln(w)
	if len(im.refused) > 0 {
		sort.Strings(im.refused)
		fmt.Fprintf(w, "refused %d:\n", len(im.refused))
		for _, r := range im.refused {
			fmt.Fprintln(w, "  "+r)
		}
	}
	switch {
	case im.failure != nil:
		return fmt.Errorf("import stopped: %w; %s records what is stored: run the same command again to go on", im.failure, journalPath)
	case len(im.refused) > 0:
		return &importRefused{n: len(im.refused), journal: journalPath}
	}
	im.journal.close()
	if err := os.Remove(journalPath); err != nil {
		return fmt.Errorf("remove the journal: %w", err)
	}
	return nil
}

// importRefused is an import that stored the other jobs but not these: bad input (exit 2).
type importRefused struct {
	n       int
	journal string
}

func (e *importRefused) Error() string {
	return fmt.Sprintf("%s refused (listed above); mend them and run the same command again: %s records what is stored", plural(e.n, "job"), e.journal)
}

// isTerminal reports whether w is a terminal (a progress bar may be redrawn in place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
