package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// importItem is one job to import: where it goes and its resource, {"name", "properties"}.
type importItem struct {
	collection, job string
	resource        json.RawMessage
	from            string // where it was read, for messages
}

func (it importItem) key() string { return it.collection + "/" + it.job }

// azureID reads the collection and job of an Azure resource id:
// /subscriptions/…/providers/Microsoft.Scheduler/jobCollections/<c>/jobs/<j>.
var azureID = regexp.MustCompile(`(?i)/jobCollections/([^/]+)/jobs/([^/]+)$`)

// readSources reads every job the paths hold: a folder of definition files (<job>.json, or
// <collection>/<job>.json), an Azure export (a JSON array of job resources, as `az scheduler
// job list` writes it, or the REST listing {"value": [...]}), or one definition file. A job's
// collection is the one given, else the one its id, name or folder says.
func readSources(paths []string, collection string, each func(importItem) error) error {
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return usagef("%v", err)
		}
		if info.IsDir() {
			err = readFolder(p, collection, each)
		} else {
			err = readExport(p, collection, each)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readFolder reads the .json files of a folder, in name order; a file in a subfolder takes
// the subfolder as its collection when none is given.
func readFolder(dir, collection string, each func(importItem) error) error {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && definitionFile(path) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := readUTF8(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		raw = fromYAML(raw) // a .yaml file, as -f reads one; JSON is left as it is
		c := collection
		if rel, _ := filepath.Rel(dir, filepath.Dir(f)); c == "" && rel != "." {
			c = filepath.Base(rel)
		}
		it, err := item(raw, c, strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), f)
		if err != nil {
			return err
		}
		if err := each(it); err != nil {
			return err
		}
	}
	return nil
}

// definitionFile reports whether a folder's file is a definition: .json, or .yaml and .yml
// (what `schedctl job get -o yaml` prints).
func definitionFile(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".json" || ext == ".yaml" || ext == ".yml"
}

// readExport reads a file of one definition, or of many (an array, or {"value": [...]}), one
// at a time: an export of a million jobs is not held in memory whole. A .yaml or .yml file is
// turned into JSON first, whole.
func readExport(path, collection string, each func(importItem) error) error {
	f, err := os.Open(path)
	if err != nil {
		return usagef("%v", err)
	}
	defer f.Close()
	var in io.Reader = utf8Reader(f)
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" {
		b, err := io.ReadAll(in)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			return fmt.Errorf("read %s: not YAML: %w", path, err)
		}
		in = bytes.NewReader(j)
	}
	r := bufio.NewReaderSize(in, 1<<20)
	first, err := firstByte(r)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	dec := json.NewDecoder(r)
	if first == '[' {
		return readArray(dec, path, collection, each)
	}
	var whole map[string]json.RawMessage
	if err := dec.Decode(&whole); err != nil {
		return fmt.Errorf("read %s: not JSON: %w", path, err)
	}
	if value, ok := whole["value"]; ok && len(whole) <= 2 { // {"value": [...], "nextLink": …}
		return readArray(json.NewDecoder(bytes.NewReader(value)), path, collection, each)
	}
	raw, _ := json.Marshal(whole)
	it, err := item(raw, collection, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), path)
	if err != nil {
		return err
	}
	return each(it)
}

func firstByte(r *bufio.Reader) (byte, error) {
	for {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, r.UnreadByte()
		}
	}
}

// readArray reads a JSON array of job resources, element by element.
func readArray(dec *json.Decoder, path, collection string, each func(importItem) error) error {
	if _, err := dec.Token(); err != nil { // [
		return fmt.Errorf("read %s: %w", path, err)
	}
	for i := 0; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("read %s, job %d: %w", path, i, err)
		}
		it, err := item(raw, collection, "", fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return err
		}
		if err := each(it); err != nil {
			return err
		}
	}
	return nil
}

// item makes the job resource of one definition: its name from the resource (id, or name as
// "collection/job" or "job"), else fallback (a file name); its collection from the one given,
// else the resource.
func item(raw []byte, collection, fallback, from string) (importItem, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(raw, &res); err != nil {
		return importItem{}, fmt.Errorf("%s: not a JSON object: %w", from, err)
	}
	var id, name string
	_ = json.Unmarshal(res["id"], &id)
	_ = json.Unmarshal(res["name"], &name)
	c, j := "", fallback
	if m := azureID.FindStringSubmatch(id); m != nil {
		c, j = m[1], m[2]
	} else if before, after, ok := strings.Cut(name, "/"); ok {
		c, j = before, after
	} else if name != "" {
		j = name
	}
	if collection != "" {
		c = collection
	}
	switch {
	case j == "":
		return importItem{}, fmt.Errorf("%s: the job has no name (an id, a name, or a file name)", from)
	case c == "":
		return importItem{}, fmt.Errorf("%s: no collection for job %s: give one (schedctl job import COLLECTION ...)", from, j)
	}
	props, wrapped := res["properties"]
	if !wrapped {
		props = raw
	}
	resource, err := json.Marshal(map[string]json.RawMessage{"name": json.RawMessage(quote(j)), "properties": props})
	if err != nil {
		return importItem{}, fmt.Errorf("%s: %w", from, err)
	}
	return importItem{collection: c, job: j, resource: resource, from: from}, nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// journal records the jobs an import has stored, so that the same import run again passes
// over them. Its first line names the import (the sources), so that another import does not
// take it for its own.
type journal struct {
	path string
	done map[string]bool
	f    *os.File
}

func openJournal(path, identity string) (*journal, error) {
	j := &journal{path: path, done: map[string]bool{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("journal %s: %w", path, err)
	default:
		lines := strings.Split(string(b), "\n")
		if lines[0] != "# schedctl import "+identity {
			return nil, usagef("journal %s belongs to another import (%s): give --journal another file, or delete it", path, strings.TrimPrefix(lines[0], "# schedctl import "))
		}
		for _, l := range lines[1:] {
			if l != "" {
				j.done[l] = true
			}
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	if len(b) == 0 {
		if _, err := fmt.Fprintf(f, "# schedctl import %s\n", identity); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal %s: %w", path, err)
		}
	}
	j.f = f
	return j, nil
}

// record writes the jobs stored.
func (j *journal) record(keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := io.WriteString(j.f, strings.Join(keys, "\n")+"\n")
	return err
}

func (j *journal) close() { j.f.Close() }
