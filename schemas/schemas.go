// Package schemas holds the JSON Schemas (2020-12) of resched's resources and example job
// files, embedded so that the intake validator and the tools read exactly what editors see.
//
// job.schema.json describes a job definition, given as the whole resource or as the
// properties object alone; collection.schema.json a job collection. Besides standard keywords
// the schemas carry errorMessage, the sentence resched reports when a keyword fails (a string,
// or an object keyed by keyword). examples/ holds valid jobs; examples/invalid/ holds one job
// per rejection rule, each with a <name>.expect file listing the problems it must produce.
package schemas

import "embed"

// FS holds the schemas (*.schema.json) and the examples/ tree.
//
//go:embed *.json examples
var FS embed.FS

// The schema file names inside FS.
const (
	JobFile        = "job.schema.json"
	CollectionFile = "collection.schema.json"
)

// The $id of each schema.
const (
	JobID        = "https://resched.dev/schemas/job.schema.json"
	CollectionID = "https://resched.dev/schemas/collection.schema.json"
)

// Job returns job.schema.json.
func Job() []byte { return mustRead(JobFile) }

// Collection returns collection.schema.json.
func Collection() []byte { return mustRead(CollectionFile) }

// mustRead reads an embedded file. The files are compiled into the binary, so a failure is a
// build mistake that the package's tests catch, never a run-time condition.
func mustRead(name string) []byte {
	b, err := FS.ReadFile(name)
	if err != nil {
		panic("schemas: embedded file missing: " + name)
	}
	return b
}
