package bus_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
)

// BenchmarkDueStream measures what the due stream costs per occurrence in CPU (nats-server and
// its clients together, all in this process): each message published with its id and its
// acknowledgement awaited, in rounds of 256 occurrences as a planner's batch does, then pulled
// by two workers through the shared consumer and acknowledged, on the stream EnsureStreams
// creates. One occurrence a message is the contract (docs/nats-api.md); 8 and 32 measure what
// one message for several occurrences would cost instead (docs/benchmarks.md, "What would move
// the three targets not met").
func BenchmarkDueStream(b *testing.B) {
	for _, per := range []int{1, 8, 32} {
		b.Run("occurrences-per-message="+strconv.Itoa(per), func(b *testing.B) { benchDueStream(b, per) })
	}
}

func benchDueStream(b *testing.B, per int) {
	srv := natstest.Start(b)
	// The workers end before the server does, even when the benchmark fails half way.
	ctx, cancel := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	b.Cleanup(func() { cancel(); workers.Wait() })
	js, err := jetstream.New(srv.Connect(b), jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		b.Fatal(err)
	}
	subjects := bus.NewSubjects("")
	if _, err := bus.EnsureStreams(ctx, js, subjects, bus.StreamOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, subjects.DueStream(), bus.WorkerConsumerConfig(90*time.Second, 10_000)); err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	one := bus.AppendDue(nil, "c", "j", 0, at, 1, []byte(`{"type":"Http","request":{"uri":"http://127.0.0.1:8080/hook","method":"POST","body":"ping"}}`))
	data := make([]byte, 0, per*len(one))
	for range per {
		data = append(data, one...)
	}
	msgs := (b.N + per - 1) / per
	var pulled atomic.Int64
	for range 2 {
		workers.Go(func() { pullAndAck(ctx, b, srv, subjects, &pulled, int64(msgs)) })
	}

	b.ResetTimer()
	start := testenv.ProcessCPU(b)
	for first := 0; first < msgs; first += 256 / per {
		var acks []jetstream.PubAckFuture
		for i := first; i < min(first+256/per, msgs); i++ {
			m := &nats.Msg{Subject: subjects.Due("c", "j"+strconv.Itoa(i)), Data: data,
				Header: nats.Header{bus.HeaderMsgID: []string{bus.MsgID("c", "j"+strconv.Itoa(i), 0, at)}}}
			ack, err := js.PublishMsgAsync(m)
			if err != nil {
				b.Fatal(err)
			}
			acks = append(acks, ack)
		}
		for _, ack := range acks {
			select {
			case <-ack.Ok():
			case err := <-ack.Err():
				b.Fatal(err)
			}
		}
	}
	workers.Wait()
	b.StopTimer()
	b.ReportMetric(float64((testenv.ProcessCPU(b)-start).Microseconds())/float64(b.N), "cpu-µs/occurrence")
}

// pullAndAck is one worker: it fetches up to 16 messages at a time and acknowledges each,
// until all messages have been pulled or ctx ends.
func pullAndAck(ctx context.Context, b *testing.B, srv *natstest.Server, subjects bus.Subjects, pulled *atomic.Int64, all int64) {
	js, err := jetstream.New(srv.Connect(b))
	if err != nil {
		b.Error(err)
		return
	}
	cons, err := js.Consumer(ctx, subjects.DueStream(), bus.WorkerConsumer)
	if err != nil {
		b.Error(err)
		return
	}
	for pulled.Load() < all && ctx.Err() == nil {
		batch, err := cons.Fetch(16, jetstream.FetchMaxWait(50*time.Millisecond))
		if err != nil {
			b.Error(err)
			return
		}
		for m := range batch.Messages() {
			if err := m.Ack(); err != nil {
				b.Error(err)
				return
			}
			pulled.Add(1)
		}
	}
}
