package jobs

import (
	"context"
	"time"

	"github.com/resched/resched/shared/job"
)

// plan is what a collection's sku brings, as the original service's plans did
// (docs/azure-migration.md, "Plans"): a default and maximum job count, and the shortest
// recurrence allowed by default and at most. A collection without a sku has no plan: its quota
// is what it says.
type plan struct {
	maxJobs       int
	minRecurrence job.MaxRecurrence
}

var plans = map[job.SkuName]plan{
	job.SkuFree:       {maxJobs: 5, minRecurrence: job.MaxRecurrence{Frequency: job.Hour, Interval: 1}},
	job.SkuStandard:   {maxJobs: 50, minRecurrence: job.MaxRecurrence{Frequency: job.Minute, Interval: 1}},
	job.SkuP10Premium: {maxJobs: 50, minRecurrence: job.MaxRecurrence{Frequency: job.Minute, Interval: 1}},
	job.SkuP20Premium: {maxJobs: 1000, minRecurrence: job.MaxRecurrence{Frequency: job.Minute, Interval: 1}},
}

// freeRetryInterval is the shortest retry interval of a Free collection's jobs.
const freeRetryInterval = time.Hour

// applyPlan fills the quota a plan implies and refuses one beyond the plan's maxima, with the
// service's words.
func applyPlan(p *job.CollectionProperties) error {
	if p.Sku == nil || p.Sku.Name == "" {
		return nil
	}
	pl := plans[p.Sku.Name]
	if p.Quota == nil {
		p.Quota = &job.Quota{}
	}
	q := p.Quota
	switch {
	case q.MaxJobCount == 0:
		q.MaxJobCount = pl.maxJobs
	case q.MaxJobCount > pl.maxJobs:
		return badRequest("The maximum job count quota has a value that is too large; this quota cannot be set higher than '%d' for %s job collections.", pl.maxJobs, p.Sku.Name)
	}
	min := pl.minRecurrence
	switch {
	case q.MaxRecurrence == nil || q.MaxRecurrence.Frequency == 0:
		q.MaxRecurrence = &min
	case period(*q.MaxRecurrence) < period(min):
		return badRequest("The provided maxRecurrence for job collection quota %d %s exceeds the permissible limit (%d %s).",
			max(q.MaxRecurrence.Interval, 1), q.MaxRecurrence.Frequency, min.Interval, min.Frequency)
	}
	return nil
}

func period(m job.MaxRecurrence) time.Duration {
	return unit[m.Frequency] * time.Duration(max(m.Interval, 1))
}

// checkFreeJob refuses what a Free collection's jobs may not do: authenticate to their
// targets, or retry more often than hourly.
func checkFreeJob(coll *job.Collection, p job.Properties) error {
	if coll.Properties.Sku == nil || coll.Properties.Sku.Name != job.SkuFree || p.Action == nil {
		return nil
	}
	specs := []*job.ActionSpec{&p.Action.ActionSpec}
	if p.Action.ErrorAction != nil {
		specs = append(specs, &p.Action.ErrorAction.ActionSpec)
	}
	for i, s := range specs {
		where := "action"
		if i == 1 {
			where = "action.errorAction"
		}
		if s.Request != nil && s.Request.Authentication != nil && s.Request.Authentication.Type != "" {
			return conflict("%s.request.authentication: jobs of a Free job collection cannot use outbound authentication; change the collection's plan to Standard or Premium", where)
		}
		if r := s.RetryPolicy; r != nil && r.RetryInterval != nil && r.RetryType != job.RetryNone && r.RetryInterval.Std() < freeRetryInterval {
			return badRequest("%s.retryPolicy.retryInterval: at least 1 hour in a Free job collection", where)
		}
	}
	return nil
}

// checkDowngrade refuses to make an existing collection Free while its jobs break the Free
// plan's rules: more than 5 jobs, a job that recurs more often than hourly (checked when the
// quota is applied to each job) or authenticates to its target.
func (s *Service) checkDowngrade(ctx context.Context, c string, coll *job.Collection) error {
	page, err := s.ListJobs(ctx, c, "", PageRequest{Top: plans[job.SkuFree].maxJobs + 1})
	if err != nil {
		return err
	}
	if len(page.Value) > plans[job.SkuFree].maxJobs {
		return conflict("the job collection has more than %d jobs: it cannot become Free", plans[job.SkuFree].maxJobs)
	}
	for _, d := range page.Value {
		if err := checkFreeJob(coll, d.Properties); err != nil {
			return conflict("job %s: %s: the job collection cannot become Free", d.Name, err.(*Error).Message)
		}
		if r := d.Properties.Recurrence; r != nil && unit[r.Frequency]*time.Duration(max(r.Interval, 1)) < time.Hour {
			return conflict("job %s recurs more often than hourly: the job collection cannot become Free", d.Name)
		}
	}
	return nil
}
