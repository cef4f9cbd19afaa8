package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natstest"
)

const importDef = `{"startTime": "2030-01-01T00:00:00Z",
  "action": {"type": "Http", "request": {"uri": "http://localhost:9/x", "method": "POST"}},
  "recurrence": {"frequency": "Hour"}}`

// An import from a folder of definitions (a subfolder per collection) and an Azure export: the
// jobs land in their collections, a refused job is named with its file and the reason, and
// the same command run again, once the file is mended, stores only what is left.
func TestImportFoldersAndAzureExportsAndResumes(t *testing.T) {
	p := startPlanner(t)
	dir := t.TempDir()
	t.Chdir(dir) // the journal's default place
	for _, c := range []string{"ops", "reports"} {
		p.mustRun(t, "", "collection", "create", c)
	}
	folder := filepath.Join(dir, "defs")
	for i := range 12 {
		c := []string{"ops", "reports"}[i%2]
		if err := os.MkdirAll(filepath.Join(folder, c), 0o755); err != nil {
			t.Fatal(err)
		}
		def := importDef
		if i == 5 {
			def = strings.Replace(importDef, `"Hour"`, `"Fortnight"`, 1)
		}
		if err := os.WriteFile(filepath.Join(folder, c, fmt.Sprintf("job-%02d.json", i)), []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var export []map[string]any
	for i := range 30 {
		var props map[string]any
		_ = json.Unmarshal([]byte(importDef), &props)
		export = append(export, map[string]any{
			"id":   fmt.Sprintf("/subscriptions/s/resourceGroups/g/providers/Microsoft.Scheduler/jobCollections/ops/jobs/az-%02d", i),
			"name": fmt.Sprintf("ops/az-%02d", i), "type": "Microsoft.Scheduler/jobCollections/jobs", "properties": props,
		})
	}
	exportFile := filepath.Join(dir, "export.json")
	b, _ := json.Marshal(export)
	if err := os.WriteFile(exportFile, b, 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := p.schedctl(t, "", "job", "import", folder, exportFile, "--batch", "7")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (a job refused)\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"imported 41 jobs", "41 created", "refused 1:", "reports/job-05 (" + filepath.Join(folder, "reports", "job-05.json") + ")",
		"recurrence.frequency"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "schedctl-import.journal") {
		t.Errorf("the error does not say where the journal is: %s", errOut)
	}
	list := p.mustRun(t, "", "job", "list", "ops", "--all", "-o", "json")
	if n := strings.Count(list, `"name": "ops/`); n != 36 {
		t.Errorf("ops holds %d jobs, want 36", n)
	}

	// Mended, the same command again: only the refused job is sent.
	if err := os.WriteFile(filepath.Join(folder, "reports", "job-05.json"), []byte(importDef), 0o644); err != nil {
		t.Fatal(err)
	}
	out = p.mustRun(t, "", "job", "import", folder, exportFile, "--batch", "7")
	if !strings.Contains(out, "imported 1 job in") || !strings.Contains(out, "41 already imported by an earlier run") {
		t.Errorf("the resumed import:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "schedctl-import.journal")); !os.IsNotExist(err) {
		t.Errorf("the journal of a finished import is left: %v", err)
	}
	// Another import is not confused by a journal of this one.
	if err := os.WriteFile(filepath.Join(dir, "schedctl-import.journal"), []byte("# schedctl import something else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.mustFail(t, "", 2, []string{"belongs to another import"}, "job", "import", "reports", exportFile)
}

// YAML, as `schedctl job get -o yaml` prints it, imports as JSON does: files of a folder, and a
// YAML list of job resources (an export kept in YAML).
func TestImportYAML(t *testing.T) {
	p := startPlanner(t)
	dir := t.TempDir()
	t.Chdir(dir)
	p.mustRun(t, "", "collection", "create", "ops")
	p.mustRun(t, "", "job", "create", "ops/source", "--every", "1h", "--at", "2030-01-01T00:00:00Z",
		"--http-post", "http://localhost:9/x", "--retry", "2@30s", "--tz", "Europe/Paris")
	printed := p.mustRun(t, "", "job", "get", "ops/source", "-o", "yaml")
	folder := filepath.Join(dir, "defs")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"from-get.yaml": printed, "written.yml": "action:\n  type: Http\n  request: {uri: 'http://localhost:9/y', method: GET}\n"} {
		if err := os.WriteFile(filepath.Join(folder, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := filepath.Join(dir, "export.yaml")
	listText := "- name: ops/listed-1\n  properties:\n    action: {type: Http, request: {uri: 'http://localhost:9/z', method: GET}}\n" +
		"- name: ops/listed-2\n  properties:\n    action: {type: Http, request: {uri: 'http://localhost:9/z', method: GET}}\n"
	if err := os.WriteFile(list, []byte(listText), 0o644); err != nil {
		t.Fatal(err)
	}
	var got, want struct{ Properties json.RawMessage }
	decode(t, p.mustRun(t, "", "job", "get", "ops/source", "-o", "json"), &want)
	p.mustRun(t, "", "job", "delete", "ops/source", "--yes")
	out := p.mustRun(t, "", "job", "import", "ops", folder, list)
	if !strings.Contains(out, "imported 4 jobs") {
		t.Fatalf("import of YAML:\n%s", out)
	}
	// The printed YAML holds the job's name, which the import follows.
	decode(t, p.mustRun(t, "", "job", "get", "ops/source", "-o", "json"), &got)
	strip := func(b json.RawMessage) string { // the status differs: one has not been read yet
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		delete(m, "status")
		out, _ := json.Marshal(m)
		return string(out)
	}
	if strip(got.Properties) != strip(want.Properties) {
		t.Errorf("the job imported from its YAML differs:\n got %s\nwant %s", strip(got.Properties), strip(want.Properties))
	}
	for _, j := range []string{"ops/written", "ops/listed-1", "ops/listed-2"} {
		p.mustRun(t, "", "job", "get", j)
	}
}

// The jobs a planner left unchecked in a bulk request, its time taken by the jobs before them
// (503 ServerBusy), are sent again, in a smaller request each time, until all are stored.
func TestImportSendsAgainWhatThePlannerLeftUnchecked(t *testing.T) {
	ns := natstest.Start(t)
	var mu sync.Mutex
	var sizes []int
	standIn(t, ns, "scheduler.api.jobs.bulk.ops", func(m *nats.Msg) {
		var req struct{ Jobs []json.RawMessage }
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		sizes = append(sizes, len(req.Jobs))
		mu.Unlock()
		value := make([]map[string]any, len(req.Jobs)) // the first two stored, the rest left
		for i := range value {
			value[i] = map[string]any{"name": fmt.Sprint(i), "status": 201}
			if i >= 2 {
				value[i] = map[string]any{"name": fmt.Sprint(i), "status": 503, "error": map[string]any{"code": "ServerBusy", "message": "not checked nor stored"}}
			}
		}
		b, _ := json.Marshal(map[string]any{"value": value})
		_ = m.Respond(b)
	})
	dir := t.TempDir()
	t.Chdir(dir)
	folder := filepath.Join(dir, "defs", "ops")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if err := os.WriteFile(filepath.Join(folder, fmt.Sprintf("job-%d.json", i)), []byte(importDef), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := schedctl(t, "", "job", "import", filepath.Join(dir, "defs"), "--server", ns.ClientURL())
	if code != 0 || !strings.Contains(out+errOut, "7 created") {
		t.Errorf("exit %d, want 0 and the 7 jobs created\n%s%s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sizes) != "[7 5 3 1]" {
		t.Errorf("requests of %v jobs, want [7 5 3 1]", sizes)
	}
}
