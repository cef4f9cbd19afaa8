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
// leave it); a rest of 10 s between moves held such a client there, its jobs 13.6 s late. So
// the rest is only lengthened where the answer is ambiguous: a client that moved and finds the
// stream without a leader (or no answer) on its new server too takes two servers' word for an
// election, and waits watchFailures × electionRest probes before it moves again. A leader
// that has not heard from its replicas (errNoQuorum) is only seen on a server cut off with
// it, so that answer moves it after watchFailures, moved or not. Without that rest, every
// client moved every 3 s through all the servers, the one cut off among them, while the
// cluster elected its leaders after the cut healed (TestNATSClusterServerCutOff: planners
// moved three times in 6 s, and a healthy planner's jobs waited 3 s on the server cut off).
const (
	watchEvery    = time.Second
	watchFailures = 3
	electionRest  = 3
)

// WatchJetStream runs until ctx ends. probe asks JetStream something cheap (StreamLed) and
// returns its error. With a single server known there is nowhere to go, and it only probes.
func (c *Conn) WatchJetStream(ctx context.Context, probe func(context.Context) error, logger *slog.Logger) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	var w watch
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.IsConnected() {
			w.failed = 0
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, watchEvery)
		err := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if !w.after(err) || len(c.Servers()) < 2 {
			continue
		}
		logger.Warn("JetStream cannot be reached through this NATS server; moving to another",
			"server", config.RedactURLs(c.ConnectedUrl()), "unanswered", w.failed, "error", err)
		w.moved()
		if err := c.ForceReconnect(); err != nil {
			logger.Warn("nats reconnect", "error", err)
		}
	}
}

// watch is WatchJetStream's count of a connection's probes.
type watch struct {
	failed int  // probes unanswered in a row
	hopped bool // the connection moved since JetStream last answered through it
}

// after counts a probe's outcome and says whether the connection should move.
func (w *watch) after(err error) bool {
	if err == nil {
		*w = watch{}
		return false
	}
	w.failed++
	if w.hopped && !errors.Is(err, errNoQuorum) {
		return w.failed >= watchFailures*electionRest
	}
	return w.failed >= watchFailures
}

// moved starts the count again after a move.
func (w *watch) moved() {
	w.failed = 0
	w.hopped = true
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
