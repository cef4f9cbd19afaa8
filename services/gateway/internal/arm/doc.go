// Package arm serves the Azure Resource Manager REST surface of Microsoft.Scheduler,
// api-version 2016-03-01, over the scheduler's NATS API (docs/nats-api.md): job collections,
// jobs and their history under /subscriptions/{s}/resourceGroups/{rg}/providers/
// Microsoft.Scheduler/, with full ARM ids, absolute nextLinks, the ARM error shape, the plans'
// rules that depend on a subscription, and the provider and resource-group calls PowerShell
// makes. It keeps no state: every request becomes one or more requests to the planners.
//
// The mapping of ARM scope onto the planners' flat collection names is in scope.go and
// docs/azure-migration.md.
package arm
