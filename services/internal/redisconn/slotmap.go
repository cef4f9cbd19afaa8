package redisconn

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// slotMapTimeout bounds each node's answer when the cluster client reads the slot map again.
// go-redis reads it in the background, without a deadline, asking the nodes one at a time: a
// master that hangs (a frozen host, a network dropping packets) held each read for the
// client's whole read time-out (5 s), and the map that shows its replica promoted came that
// much later. A node answers CLUSTER SLOTS in a millisecond.
const slotMapTimeout = 500 * time.Millisecond

// slotMapDeadline is a hook on each cluster node's client that gives the slot-map reads a
// deadline of their own; every other command keeps the deadline its caller gave.
type slotMapDeadline struct{}

func (slotMapDeadline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (slotMapDeadline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, ok := ctx.Deadline(); ok || !isSlotMapRead(cmd) {
			return next(ctx, cmd)
		}
		ctx, cancel := context.WithTimeout(ctx, slotMapTimeout)
		defer cancel()
		return next(ctx, cmd)
	}
}

func (slotMapDeadline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func isSlotMapRead(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 || cmd.Name() != "cluster" {
		return false
	}
	sub, _ := args[1].(string)
	return strings.EqualFold(sub, "slots") || strings.EqualFold(sub, "shards")
}

// newClusterNode is the cluster client's factory of node clients, with the slot-map deadline.
func newClusterNode(opt *redis.Options) *redis.Client {
	c := redis.NewClient(opt)
	c.AddHook(slotMapDeadline{})
	return c
}
