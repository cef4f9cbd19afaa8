// Package chaos holds the fault test of the whole system: three planners and three workers
// built from the repository, a redis-server with its append-only file, a JetStream server and
// an HTTP target that records every delivery, while planners and workers are killed with
// SIGKILL, Redis and NATS restart and every planner is down for a while. It then accounts for
// every occurrence the jobs' schedules call for: delivered, skipped (and why), or lost, and
// compares the history and counters the planners kept with what the target received
// (docs/reliability.md). Beside it, runs of one fault each: a Redis or NATS server that dies or
// hangs, a link cut or frozen, and the Azure REST gateway on a NATS server cut off from the
// planners or on a link that hangs (gateway_test.go).
//
// `make test` runs a short version (about a minute); `make chaos` runs the full one
// (RESCHED_CHAOS=full: 1,200 jobs, more than 50,000 occurrences over five and a half minutes).
// It has no code of its own outside the test.
package chaos
