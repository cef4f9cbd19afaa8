package jobschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/resched/resched/schemas"
	"github.com/resched/resched/shared/job"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator decodes and validates definitions against the embedded schemas, compiled once.
// It is safe for concurrent use.
type Validator struct {
	job        *jsonschema.Schema // job.schema.json#/$defs/jobProperties
	jobPlain   *jsonschema.Schema // the same without its conditional lists (conditions.go)
	collection *jsonschema.Schema // collection.schema.json
	docs       schemaDocs
	minRetry   time.Duration
}

// Option configures a Validator.
type Option func(*Validator)

// WithMinRetryInterval sets the shortest retryInterval accepted (default 15 s).
func WithMinRetryInterval(d time.Duration) Option {
	return func(v *Validator) { v.minRetry = d }
}

// New compiles the embedded schemas.
func New(opts ...Option) (*Validator, error) {
	v := &Validator{docs: schemaDocs{}, minRetry: DefaultMinRetryWait}
	for _, o := range opts {
		o(v)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for id, raw := range map[string][]byte{schemas.JobID: schemas.Job(), schemas.CollectionID: schemas.Collection()} {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("jobschema: read %s: %w", id, err)
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, fmt.Errorf("jobschema: add %s: %w", id, err)
		}
		v.docs[id] = doc
	}
	plain, err := unconditional(v.docs[schemas.JobID], plainJobID)
	if err != nil {
		return nil, fmt.Errorf("jobschema: the job schema without its conditions: %w", err)
	}
	if err := c.AddResource(plainJobID, plain); err != nil {
		return nil, fmt.Errorf("jobschema: add %s: %w", plainJobID, err)
	}
	if v.job, err = c.Compile(schemas.JobID + "#/$defs/jobProperties"); err != nil {
		return nil, fmt.Errorf("jobschema: compile the job schema: %w", err)
	}
	if v.jobPlain, err = c.Compile(plainJobID + "#/$defs/jobProperties"); err != nil {
		return nil, fmt.Errorf("jobschema: compile the job schema without its conditions: %w", err)
	}
	if v.collection, err = c.Compile(schemas.CollectionID); err != nil {
		return nil, fmt.Errorf("jobschema: compile the collection schema: %w", err)
	}
	return v, nil
}

// standard is the Validator behind the package-level functions. It is built once at package
// initialisation, from files compiled into the binary, and never changes afterwards.
var standard, standardErr = New()

// Decode validates a job with the default settings; see Validator.Decode.
func Decode(raw []byte) (*job.Definition, error) {
	if standardErr != nil {
		return nil, standardErr
	}
	return standard.Decode(raw)
}

// DecodeCollection validates a collection with the default settings; see
// Validator.DecodeCollection.
func DecodeCollection(raw []byte) (*job.Collection, error) {
	if standardErr != nil {
		return nil, standardErr
	}
	return standard.DecodeCollection(raw)
}

// DecodeToPreview validates a job with the default settings; see Validator.DecodeToPreview.
func DecodeToPreview(raw []byte) (*job.Definition, error) {
	if standardErr != nil {
		return nil, standardErr
	}
	return standard.DecodeToPreview(raw)
}

// Decode reads a job given as the whole resource {"properties": {...}} or as the properties
// object alone, and checks it. A bad job yields a nil definition and a *ValidationError
// listing every problem, with paths relative to the properties object in both forms. The
// definition returned holds only what a client may set: id, type, name, status and the
// certificate details are dropped.
func (v *Validator) Decode(raw []byte) (*job.Definition, error) {
	return v.decode(raw, false)
}

// DecodeToPreview reads a job as Decode does, for a preview of its runs: only its schedule
// matters there, so its action may be left out (a schedule alone, as someone writes it to see
// when it runs); a placeholder action then stands in for it. An action that is there is checked.
func (v *Validator) DecodeToPreview(raw []byte) (*job.Definition, error) {
	return v.decode(raw, true)
}

// placeholderAction stands in for the action of a job previewed without one: a new one each
// time, since the tree it joins is the caller's to change.
func placeholderAction() map[string]any {
	return map[string]any{"type": "Http", "request": map[string]any{"method": "GET", "uri": "http://preview.invalid/"}}
}

func (v *Validator) decode(raw []byte, preview bool) (*job.Definition, error) {
	raw = withoutBOM(raw)
	probs := &problems{}
	tree, ok := parse(raw, "job", probs)
	if !ok || !checkUTF8(raw, true, probs) {
		return nil, probs.err()
	}
	wrapped := hasMemberFold(tree.(map[string]any), jobResourceKeys...)
	props := unwrap(tree, probs)
	if props == nil || !checkNumbers(props, "", probs) {
		return nil, probs.err()
	}
	changed := false
	if preview && !hasMemberFold(props, "action") {
		props["action"], changed = placeholderAction(), true
	}
	canon := (&canonicaliser{probs: probs, changed: &changed}).value(v.job, props)
	if !v.jobHolds(canon) {
		v.validate(v.job, canon, probs)
	}
	if m, ok := canon.(map[string]any); ok {
		v.check(probs, func(c checker) { c.job(m) })
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	return typedJob(raw, wrapped, canon, changed)
}

// plainJobID names the job schema without its conditional lists, for the compiler only.
const plainJobID = "https://resched.dev/schemas/job.unconditional.json"

// jobHolds reports whether canonical job properties are valid against the job schema, the
// cheap way (conditions.go); false means the whole schema must say.
func (v *Validator) jobHolds(canon any) bool {
	m, ok := canon.(map[string]any)
	return ok && v.jobPlain.Validate(canon) == nil && conditionsHold(m)
}

// typedJob reads a valid job into the model. The canonical tree is what is read, but a
// definition already written canonically (the names and enum values spelled as the schema
// spells them, no null, read-only or wrapped member: the common case) is read from its own
// bytes, which is the same and spares writing the tree out as JSON first.
func typedJob(raw []byte, wrapped bool, canon any, changed bool) (*job.Definition, error) {
	if !changed {
		var d job.Definition
		var err error
		if wrapped {
			err = json.Unmarshal(raw, &d)
		} else {
			err = json.Unmarshal(raw, &d.Properties)
		}
		if err == nil {
			return &job.Definition{Properties: d.Properties}, nil
		}
	}
	var p job.Properties
	if err := decodeTyped(canon, &p); err != nil {
		return nil, err
	}
	return &job.Definition{Properties: p}, nil
}

// DecodeCollection reads a collection given as the whole resource or as its properties
// alone, and checks it. Paths are relative to the resource (properties.quota.maxJobCount)
// in both forms.
func (v *Validator) DecodeCollection(raw []byte) (*job.Collection, error) {
	raw = withoutBOM(raw)
	probs := &problems{}
	tree, ok := parse(raw, "collection", probs)
	if !ok || !checkUTF8(raw, false, probs) {
		return nil, probs.err()
	}
	if !hasMemberFold(tree, "properties", "id", "type", "name", "location", "tags") {
		tree = map[string]any{"properties": tree}
	}
	if !checkNumbers(tree, "", probs) {
		return nil, probs.err()
	}
	canon := (&canonicaliser{probs: probs}).value(v.collection, tree)
	v.validate(v.collection, canon, probs)
	if m, ok := canon.(map[string]any); ok {
		v.check(probs, func(c checker) { c.collection(m) })
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	var c job.Collection
	if err := decodeTyped(canon, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func (v *Validator) validate(sch *jsonschema.Schema, tree any, probs *problems) {
	err := sch.Validate(tree)
	if err == nil {
		return
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		probs.add("", "cannot be validated: "+err.Error())
		return
	}
	v.docs.report(verr, tree, "", probs)
}

// check runs the Go rules and keeps their problems except where the schema already reported
// one at the same path, so that one mistake is not told twice.
func (v *Validator) check(probs *problems, run func(checker)) {
	own := &problems{}
	run(checker{probs: own, minRetry: v.minRetry})
	for _, p := range own.list {
		if !probs.has(p.Path) {
			probs.add(p.Path, p.Message)
		}
	}
}

// withoutBOM drops a UTF-8 byte-order mark from the start of a JSON text, which RFC 8259 §8.1
// lets a parser ignore: a file saved by a Windows tool starts with one, and so does what
// `nats pub subject "$(cat file.json)"` sends of it. encoding/json refuses it.
func withoutBOM(raw []byte) []byte { return bytes.TrimPrefix(raw, []byte("\ufeff")) }

// parse applies the size limit and reads the JSON, keeping numbers exact.
func parse(raw []byte, what string, probs *problems) (any, bool) {
	if len(raw) > MaxJobSize {
		probs.add("", fmt.Sprintf("the %s is %d bytes; at most 16 KiB (16,384 bytes) are allowed", what, len(raw)))
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	err := dec.Decode(&tree)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("unexpected data after the JSON value")
		}
	}
	if err != nil {
		probs.add("", fmt.Sprintf("the %s is not valid JSON: %s", what, jsonErrorText(err)))
		return nil, false
	}
	if _, ok := tree.(map[string]any); !ok {
		probs.add("", fmt.Sprintf("the %s must be a JSON object", what))
		return nil, false
	}
	return tree, true
}

func jsonErrorText(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("%v (at byte %d)", syn, syn.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the text ends too early"
	}
	return err.Error()
}

// jobResourceKeys are the members that only a whole job resource has (the scheduler sets id,
// type and name itself); a job resource may also carry $schema, for editors.
var jobResourceKeys = []string{"properties", "id", "type", "name"}

// azNullKeys are the members of any ARM resource that `az resource show` (the Azure CLI's way
// to read a scheduler job) writes, all null for a job, which has none of them. Its output
// also names the resourceGroup. They say nothing about the job: null, they are ignored, so
// that what az printed is accepted as it is.
var azNullKeys = []string{"location", "tags", "kind", "managedBy", "sku", "plan", "identity", "extendedLocation"}

// azOutputMember reports whether k: v is one of the members az adds to a job resource.
func azOutputMember(k string, v any) bool {
	if strings.EqualFold(k, "resourceGroup") {
		_, ok := v.(string)
		return ok
	}
	return v == nil && containsFold(azNullKeys, k)
}

// unwrap returns the properties object of a job given as a whole resource, or the object
// itself when it is the properties alone. The wrapper's own problems have an empty path,
// since paths are relative to the properties object. Without a usable properties object it
// returns nil; otherwise the properties are checked even when the wrapper has a problem, so
// that every problem is reported at once.
func unwrap(tree any, probs *problems) map[string]any {
	obj := tree.(map[string]any)
	if !hasMemberFold(obj, jobResourceKeys...) {
		return obj
	}
	var props any
	found := 0
	for k, val := range obj {
		switch {
		case strings.EqualFold(k, "properties"):
			props, found = val, found+1
		case !containsFold(jobResourceKeys, k) && k != "$schema" && !azOutputMember(k, val):
			probs.add("", fmt.Sprintf("the job resource has an unknown member %q; only properties (and the read-only id, type and name) belong next to properties", k))
		}
	}
	switch {
	case found > 1:
		probs.add("", "properties is given twice (names are matched ignoring case)")
	case found == 0:
		probs.add("", "the job resource has no properties object")
	default:
		if m, ok := props.(map[string]any); ok {
			return m
		}
		probs.add("", "properties must be a JSON object")
	}
	return nil
}

// hasMemberFold reports whether tree is an object with a member of any of the names, ignoring
// case: one of the members only a whole resource has, or the action of a job.
func hasMemberFold(tree any, names ...string) bool {
	obj, _ := tree.(map[string]any)
	for k := range obj {
		if containsFold(names, k) {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// decodeTyped reads the checked tree into the model. The schema and the checks have already
// accepted it, so a failure here means the schema and the model disagree: it is reported, not
// hidden, as a problem of the whole document.
func decodeTyped(tree any, dst any) error {
	b, err := json.Marshal(tree)
	if err == nil {
		err = json.Unmarshal(b, dst)
	}
	if err != nil {
		return &ValidationError{Problems: []Problem{{Message: "cannot be read into the job model: " + err.Error()}}}
	}
	return nil
}
