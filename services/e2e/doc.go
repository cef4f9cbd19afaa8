// Package e2e holds the end-to-end test of the whole system: it builds the planner, the worker,
// schedctl and the example target, starts them with scripts/run.sh (the stack `make run`
// starts) on free ports next to Azurite and the fake Service Bus broker, and checks what the
// targets receive and what schedctl reports. It has no code of its own outside the test.
package e2e
