// Package jobschema is the intake path for untrusted job and collection definitions: it
// decodes them, checks them against the embedded JSON Schemas and the rules of
// docs/recurrence.md section 8 and the limits of the original service, and returns either the
// model (package job) or every problem at once.
//
// The pipeline: a 16 KiB size limit; JSON parsing with exact numbers; for a job, unwrapping
// {"properties": {...}}; refusing numbers with absurd exponents, which the validator cannot
// take; canonicalisation of the tree against the schema (property names and
// enum values matched ignoring case, a single number accepted for an integer list, nulls and
// read-only members dropped); validation with the schema, whose errorMessage keyword supplies
// the sentences; Go checks for what the schema cannot say (time texts, durations, time zones,
// URLs, header totals, client-settable states); then the typed decode.
//
// Paths name the field in JSON path style: recurrence.schedule.monthDays[2],
// action.request.headers["Content-Type"]. For a job they are relative to the properties
// object, whether or not the input was wrapped; problems with the document as a whole, or
// with the wrapper, have an empty path. For a collection they are relative to the resource
// (properties.quota.maxJobCount), whether or not the input was wrapped.
package jobschema
