module github.com/resched/resched/shared

go 1.26

require (
	github.com/resched/resched/schemas v0.0.0
	github.com/robfig/cron/v3 v3.0.1
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/teambition/rrule-go v1.8.2
	golang.org/x/text v0.14.0 // indirect
)

replace github.com/resched/resched/schemas => ../schemas
