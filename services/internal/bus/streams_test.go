package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
)

// The streams are created when missing; an operator's later edit survives every start, and the
// start says what differs from its settings.
func TestEnsureStreamsKeepsAnOperatorsEdits(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	subjects := bus.NewSubjects("")
	if notes, err := bus.EnsureStreams(ctx, js, subjects, bus.StreamOptions{}); err != nil || len(notes) != 0 {
		t.Fatalf("first start: %v %v", notes, err)
	}
	st, err := js.Stream(ctx, subjects.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	edited := st.CachedInfo().Config
	edited.MaxBytes, edited.Duplicates = 1<<30, 2*time.Minute // nats stream edit
	if _, err := js.UpdateStream(ctx, edited); err != nil {
		t.Fatal(err)
	}
	notes := ensure(t, js, subjects)
	var settings []string
	for _, n := range notes {
		if n.Stream != subjects.DueStream() {
			t.Errorf("a note on %s: %+v", n.Stream, n)
		}
		settings = append(settings, fmt.Sprint(n.Setting, " changed:", n.Changed))
	}
	if want := []string{"discard policy changed:true", "duplicate window changed:false"}; !slices.Equal(settings, want) {
		t.Errorf("notes %v, want %v", settings, want)
	}
	st, _ = js.Stream(ctx, subjects.DueStream())
	if got := st.CachedInfo().Config; got.MaxBytes != 1<<30 || got.Duplicates != 2*time.Minute {
		t.Errorf("the edit was undone: max bytes %d, duplicates %v", got.MaxBytes, got.Duplicates)
	}
}

// A stream capped by size or count drops its oldest messages by JetStream's default, unread:
// occurrences, results or definitions lost without a record. The start makes it refuse new
// ones instead, which are sent again; the limits that remove messages unread whatever the
// discard policy, an age or a count per subject, it can only name.
func TestEnsureStreamsMakesACappedStreamRefuseRatherThanDrop(t *testing.T) {
	ctx := context.Background()
	_, js, subjects := natstest.Start(t).JetStream(t)
	natstest.EditStream(t, js, subjects.DueStream(), func(c *jetstream.StreamConfig) { c.MaxMsgs = 1000 })
	natstest.EditStream(t, js, subjects.ResultsStream(), func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 20 })
	natstest.EditStream(t, js, subjects.IntakeStream(), func(c *jetstream.StreamConfig) {
		c.MaxAge, c.MaxMsgsPerSubject = time.Hour, 5
	})
	notes := ensure(t, js, subjects)
	got := map[string]bool{}
	for _, n := range notes {
		got[n.Stream+" "+n.Setting] = n.Changed
	}
	want := map[string]bool{subjects.DueStream() + " discard policy": true, subjects.ResultsStream() + " discard policy": true,
		subjects.IntakeStream() + " max age": false, subjects.IntakeStream() + " max messages per subject": false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("notes %v, want %v", got, want)
	}
	for _, name := range []string{subjects.DueStream(), subjects.ResultsStream()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.CachedInfo().Config; c.Discard != jetstream.DiscardNew || c.MaxMsgs+c.MaxBytes <= 0 {
			t.Errorf("%s: discard %v, max messages %d, max bytes %d; want its limit kept, discard new", name, c.Discard, c.MaxMsgs, c.MaxBytes)
		}
	}
	if notes, _ := bus.EnsureStreams(ctx, js, subjects, bus.StreamOptions{}); len(notes) != 2 {
		t.Errorf("the next start's notes: %+v, want the intake's two", notes)
	}
}

// A user not allowed to update streams cannot change the discard policy: the start names it,
// with what to set, and goes on, as it did before it changed anything.
func TestEnsureStreamsNotAllowedToChangeTheDiscardPolicyNamesIt(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Start(t, func(o *server.Options) {
		perms := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.UPDATE.>"}}}
		o.Users = []*server.User{{Username: "u", Password: "p", Permissions: perms}, {Username: "admin", Password: "p"}}
	})
	connect := func(user string) jetstream.JetStream {
		_, js := jetStreamAt(t, srv.ClientURL(), nats.UserInfo(user, "p"))
		return js
	}
	subjects := bus.NewSubjects("")
	admin := connect("admin")
	if _, err := bus.EnsureStreams(ctx, admin, subjects, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	natstest.EditStream(t, admin, subjects.DueStream(), func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 20 })
	notes, err := bus.EnsureStreams(ctx, connect("u"), subjects, bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0].Changed || !strings.Contains(notes[0].Wants, "--discard new") {
		t.Errorf("notes %+v, want the discard policy named, unchanged", notes)
	}
}

// Full tells a publish refused for want of room, which is stored once room is made, from one
// that fails otherwise: a stream at its limit, and a server whose JetStream store is used up.
func TestFull(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		server []natstest.Option
		stream jetstream.StreamConfig
	}{
		{"a stream at its max bytes", nil, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxBytes: 4096, Discard: jetstream.DiscardNew}},
		{"a stream at its max messages", nil, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, MaxMsgs: 3, Discard: jetstream.DiscardNew}},
		{"the server's store used up", []natstest.Option{func(o *server.Options) { o.JetStreamMaxStore = 8192 }},
			jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			js, err := jetstream.New(natstest.Start(t, c.server...).Connect(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(ctx, c.stream); err != nil {
				t.Fatal(err)
			}
			for i := range 100 {
				_, err := js.Publish(ctx, "s", make([]byte, 512))
				if err == nil {
					continue
				}
				if !bus.Full(err) {
					t.Fatalf("publish %d refused with %v, not taken for a full stream", i, err)
				}
				return
			}
			t.Fatal("100 publishes of 512 bytes all stored")
		})
	}
	if bus.Full(errors.New("nats: timeout")) || bus.Full(nil) {
		t.Error("an error not JetStream's taken for a full stream")
	}
}

// A stream whose largest message an operator set below what a definition or a result needs
// is left as it is, and the start says so: its occurrences or results would be refused.
func TestEnsureStreamsNotesALargestMessageTooSmall(t *testing.T) {
	_, js, subjects := natstest.Start(t).JetStream(t) // the streams as created
	for name, size := range map[string]int32{subjects.DueStream(): 4096, subjects.ResultsStream(): 64 << 10, subjects.IntakeStream(): 16 << 10} {
		natstest.SetMaxMsgSize(t, js, name, size)
	}
	notes := ensure(t, js, subjects)
	got := map[string]string{}
	for _, n := range notes {
		got[n.Stream+" "+n.Setting] = n.Has
	}
	want := map[string]string{subjects.DueStream() + " max message size": "4096", subjects.IntakeStream() + " max message size": "16384"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("notes %v, want %v (64 KiB holds a result)", got, want)
	}
}

// On a NATS cluster, streams of one replica (the replicas setting left at its single-server
// default) are named at the start that creates them and at every start after; on a single
// server they are what is wanted.
func TestEnsureStreamsNotesOneReplicaOnACluster(t *testing.T) {
	subjects := bus.NewSubjects("")
	replicaNotes := func(js jetstream.JetStream) []string {
		t.Helper()
		var out []string
		notes := ensure(t, js, subjects)
		for _, n := range notes {
			if n.Setting == "replicas" {
				out = append(out, n.Stream+" "+n.Has)
			}
		}
		slices.Sort(out)
		return out
	}
	nc, js := jetStreamAt(t, natstest.StartCluster(t, 3).URLs())
	name := nc.ConnectedClusterName()
	want := []string{subjects.DueStream() + " 1, on NATS cluster " + name, subjects.IntakeStream() + " 1, on NATS cluster " + name,
		subjects.ResultsStream() + " 1, on NATS cluster " + name}
	slices.Sort(want)
	for _, start := range []string{"first", "second"} {
		if got := replicaNotes(js); !slices.Equal(got, want) {
			t.Errorf("%s start on a cluster: notes %v, want %v", start, got, want)
		}
	}
	_, single, _ := natstest.Start(t).JetStream(t)
	if got := replicaNotes(single); len(got) != 0 {
		t.Errorf("on a single server: notes %v", got)
	}
}

// ensure runs EnsureStreams with the default options, as a planner's start does, and returns
// its notes.
func ensure(t *testing.T, js jetstream.JetStream, subjects bus.Subjects) []bus.StreamNote {
	t.Helper()
	notes, err := bus.EnsureStreams(context.Background(), js, subjects, bus.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return notes
}

// jetStreamAt connects to url with opts, closed at the test's end.
func jetStreamAt(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// StreamRisks names each setting by which a stream loses what it holds, and nothing for a
// stream as the planners make it.
func TestStreamRisks(t *testing.T) {
	made := &jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "S", Replicas: 3, MaxBytes: 1 << 30, Discard: jetstream.DiscardNew},
		Cluster: &jetstream.ClusterInfo{Name: "c1"}}
	if got := bus.StreamRisks(made); len(got) != 0 {
		t.Errorf("risks of a stream as made: %+v", got)
	}
	risky := &jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "S", Replicas: 1, MaxBytes: 1 << 30, Discard: jetstream.DiscardOld,
		MaxAge: time.Hour, MaxMsgsPerSubject: 5}, Cluster: &jetstream.ClusterInfo{Name: "c1"}}
	var settings []string
	for _, n := range bus.StreamRisks(risky) {
		if n.Stream != "S" {
			t.Errorf("note of stream %q, want S", n.Stream)
		}
		settings = append(settings, n.Setting)
	}
	if want := []string{"discard policy", "max age", "max messages per subject", "replicas"}; !slices.Equal(settings, want) {
		t.Errorf("risks %v, want %v", settings, want)
	}
	alone := &jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "S", Replicas: 1}}
	if got := bus.StreamRisks(alone); len(got) != 0 {
		t.Errorf("risks of one replica on a single server: %+v", got)
	}
}
