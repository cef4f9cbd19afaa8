// Package job is the data model of resched: job collections, job definitions, their actions,
// retry policies, status and history, in the JSON shape of Azure Scheduler's 2016-03-01 API so
// that existing definitions move over unchanged (../../docs and the reference, section 3).
//
// The package is dependency-free and does no validation beyond what a type needs to read its
// own JSON: property names match case-insensitively (encoding/json does that for struct
// fields), enum values are read case-insensitively and written in their canonical casing
// ("Enabled", "Fixed", "Http"). Checking a definition against the rules of the service is the
// job of package jobschema, which is the intake path for untrusted input.
//
// Secrets (SAS tokens and keys, passwords, PFX blobs, OAuth secrets) are kept in the structs
// because the worker needs them, but every String and LogValue method goes through Redacted,
// so printing or logging a definition never shows them.
package job
