package natsconn

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/config"
)

// A NATS server cut off from the rest of its cluster (a network partition between the
// servers' machines) still answers its clients' pings, so their connections stay up, but
// nothing they publish to a stream is stored and no consumer answers them: the stream's quorum
// is on the other side. A planner on such a server kept its leases and published nothing, and
// the workers on it delivered nothing, until the partition healed
// (TestNATSClusterServerCutOff, services/chaos). WatchJetStream asks JetStream a question
// through the connection every watchEvery; after watchFailures unanswered in a row, it moves
// the connection to another server of the cluster. The account's information and the names of
// its streams are answered by the server cut off as if nothing were wrong; the information of
// a stream waits for its leader, then (after about 5 s) says it has none (StreamLed).
//
// After a move the count starts again, so moves are at least watchFailures probes apart.
// While a stream's new leader is elected every server lacks one, and a client on the healthy
// side may move too (it was seen moving to the server cut off, whose clients were about to
// leave it); a rest of 10 s between moves held such a client there, its jobs 13.6 s late.
const (
	watchEvery    = time.Second
	watchFailures = 3
)

// WatchJetStream runs until ctx ends. probe asks JetStream something cheap (StreamLed) and
// returns its error. With a single server known there is nowhere to go, and it only probes.
func (c *Conn) WatchJetStream(ctx context.Context, probe func(context.Context) error, logger *slog.Logger) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.IsConnected() {
			failed = 0
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, watchEvery)
		err := probe(pctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			failed = 0
			continue
		}
		failed++
		if failed < watchFailures || len(c.Servers()) < 2 {
			continue
		}
		logger.Warn("JetStream cannot be reached through this NATS server; moving to another",
			"server", config.RedactURLs(c.ConnectedUrl()), "unanswered", failed, "error", err)
		failed = 0
		if err := c.ForceReconnect(); err != nil {
			logger.Warn("nats reconnect", "error", err)
		}
	}
}

var (
	errNoLeader = errors.New("the stream has no leader")
	errNoQuorum = errors.New("the stream's leader has not heard from enough of its replicas")
)

// replicaSilence is how long a stream's leader may go without hearing from a replica before
// that replica no longer counts towards a quorum; they answer its heartbeats every second.
const replicaSilence = 3 * time.Second

// StreamLed is a probe for WatchJetStream: the stream's information, with a leader when the
// stream is replicated in a cluster, which has heard from a quorum of the replicas lately. A
// leader cut off with its clients goes on calling itself leader for about 20 s (measured with
// nats-server 2.15), its replicas silent; a server cut off that does not lead the stream
// waits for the leader, then says there is none. While a new leader is elected every server
// sees none, and a move is one reconnection at most every watchFailures probes.
func StreamLed(js jetstream.JetStream, stream string) func(context.Context) error {
	return func(ctx context.Context) error {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		c := st.CachedInfo().Cluster
		switch {
		case c == nil:
			return nil // not in a cluster
		case c.Leader == "":
			return errNoLeader
		}
		heard := 0
		for _, r := range c.Replicas {
			if !r.Offline && r.Active < replicaSilence {
				heard++
			}
		}
		if 2*(heard+1) <= len(c.Replicas)+1 {
			return errNoQuorum
		}
		return nil
	}
}
