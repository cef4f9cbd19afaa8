package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Overview is the planners' state as Redis holds it, for an operator.
type Overview struct {
	Planners []LivePlanner // heartbeat not expired, by id
	Owners   []string      // by partition: the id of the planner holding its lease, "" for none
	Outages  []Outage      // newest first
}

// LivePlanner is a planner whose heartbeat holds until Until.
type LivePlanner struct {
	ID    string
	Until time.Time
}

// Overview reads the live planners, the holder of each partition's lease and the newest
// outages on record (at most outages of them). What could not be read is left out, and err says
// why (a Redis Cluster master lost).
func (s *Store) Overview(ctx context.Context, now time.Time, outages int) (Overview, error) {
	var o Overview
	var errs []error
	live, err := s.rdb.ZRangeByScoreWithScores(ctx, s.k.planners(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		errs = append(errs, fmt.Errorf("live planners: %w", err))
	}
	for _, z := range live {
		id, _ := z.Member.(string)
		o.Planners = append(o.Planners, LivePlanner{ID: id, Until: time.UnixMilli(int64(z.Score)).UTC()})
	}
	records, err := s.rdb.LRange(ctx, s.k.outages(), 0, int64(outages)-1).Result()
	if err != nil {
		errs = append(errs, fmt.Errorf("outages: %w", err))
	}
	for _, r := range records {
		if out, ok := parseOutage(r); ok {
			o.Outages = append(o.Outages, out)
		}
	}
	o.Owners = make([]string, s.Partitions())
	cmds := make([]*redis.StringCmd, s.Partitions())
	s.pipelined(ctx, len(cmds), false, func(p int) string { return s.k.owner(p) }, func(pipe redis.Pipeliner, p int) {
		cmds[p] = pipe.Get(ctx, s.k.owner(p))
	})
	for p, c := range cmds {
		switch v, err := c.Result(); {
		case err == nil:
			o.Owners[p] = v
		case !errors.Is(err, redis.Nil):
			errs = append(errs, fmt.Errorf("lease of partition %d: %w", p, err))
		}
	}
	return o, errors.Join(errs...)
}

// parseOutage reads an outage record, "<from ms>|<to ms>|<recorded ms>" (recorded absent in
// older records).
func parseOutage(text string) (Outage, bool) {
	parts := strings.Split(text, "|")
	if len(parts) < 2 {
		return Outage{}, false
	}
	f, err1 := strconv.ParseInt(parts[0], 10, 64)
	t, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return Outage{}, false
	}
	o := Outage{From: time.UnixMilli(f).UTC(), To: time.UnixMilli(t).UTC()}
	if len(parts) > 2 {
		if r, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
			o.Recorded = time.UnixMilli(r).UTC()
		}
	}
	return o, true
}
