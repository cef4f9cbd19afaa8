// Package e2ebench measures the whole system as a user runs it (docs/benchmarks.md,
// "End to end"): redis-server and nats-server processes, the planner and workers from bin/, an
// HTTP sink in the test, the jobs put through the NATS API. A burst of occurrences due at one
// second, then a steady rate aligned on whole seconds; it reports when all were on the due
// stream, delivered and recorded, the lag at the sink, early fires, and the CPU each process
// spent per fire. `make bench-e2e` runs the full sizes; `make test` a short run of each.
package e2ebench
