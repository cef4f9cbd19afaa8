// Package sdktest drives the gateway (services/gateway) with the unmodified Azure SDK for Go
// (track 1, v68, package services/scheduler/mgmt/2016-03-01/scheduler) against a real
// planner, worker, Redis and NATS, and validates every answer against the official swagger.
package sdktest
