module github.com/resched/resched/schemas

go 1.26
