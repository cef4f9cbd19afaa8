// Package recurrence decides when a job runs: the rules of docs/recurrence.md, compiled once
// per definition into a Schedule whose Next answers in time that does not grow with the age of
// the schedule. It is pure: no I/O, no clock of its own (the caller passes "now").
//
// The engine works in whole seconds. Calendar frequencies (Day, Week, Month, Year) walk wall
// clock days in the job's zone and turn each candidate wall time into an instant by the DST
// rules; clock frequencies (Second, Minute, Hour) step in absolute time and only compare each
// instant's wall clock with the schedule.
package recurrence
