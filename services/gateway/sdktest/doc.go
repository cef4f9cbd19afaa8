// Package sdktest drives the gateway (services/gateway) as its users do, against a real
// planner, worker, Redis and NATS: the REST surface with the unmodified Azure SDK for Go (track
// 1, v68, package services/scheduler/mgmt/2016-03-01/scheduler), every answer validated against
// the official swagger; with Python's unmodified azure-mgmt-scheduler (Debian's python3-azure),
// which reads every answer as the swagger types it; and the dashboard in Debian's Chromium with
// playwright-core.
package sdktest
