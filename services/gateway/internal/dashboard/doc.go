// Package dashboard is the web dashboard the gateway serves under /dashboard/: its assets,
// embedded in the binary (no CDN, no outside request), and a small JSON API over the planners'
// NATS API for them, with live updates as server-sent events fed by scheduler.events.> and the
// workers' results. Every API call needs a bearer token of the gateway's access file or issuer:
// a reader sees, an operator also runs, enables, disables, edits and deletes, each only within
// the grant's scopes (docs/dashboard.md).
package dashboard
