package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// profile is one run: the processes, the jobs and the faults.
type profile struct {
	name              string
	planners, workers int
	groups            []group       // the jobs
	span              time.Duration // occurrences from the start to the start plus span
	faults            func(c *cluster, s *schedule)
	lateBound         time.Duration // how late an occurrence due while a planner ran may be; 0: liveLateBound
}

// group is count jobs firing every `every` seconds, with a catch-up policy ("" for the
// deployment's, Latest).
type group struct {
	count, every int
	policy       string
}

// short is the version inside `make test`: about a minute, one planner kill, one worker kill
// and one planner paused.
var short = profile{
	name: "short", planners: 3, workers: 2,
	groups: []group{{40, 1, ""}, {40, 1, "All"}, {60, 5, ""}},
	span:   40 * time.Second,
	faults: func(c *cluster, s *schedule) {
		s.at(8*time.Second, "kill -9 planner-1", func() { c.killPlanner(1) })
		s.at(10*time.Second, "start planner-1", func() { c.startPlanner(1) })
		s.at(16*time.Second, "kill -9 worker-0", func() { c.killWorker(0) })
		s.at(18*time.Second, "start worker-0", func() { c.startWorker(0) })
		// Twice its leases' TTL: the others take its partitions over, and it wakes up
		// believing it holds them, maybe in the middle of a round.
		s.at(24*time.Second, "SIGSTOP planner-2", func() { c.pausePlanner(2) })
		s.at(30*time.Second, "SIGCONT planner-2", func() { c.resumePlanner(2) })
	},
}

// full is `make chaos`: 1,200 jobs, about 53,000 occurrences over five and a half minutes; a
// random planner killed every ten seconds or so and started again, workers killed, one Redis
// restart, one NATS restart, a planner paused for 6 s and a 20 s outage of every planner.
var full = profile{
	name: "full", planners: 3, workers: 3,
	groups: []group{{50, 1, ""}, {50, 1, "All"}, {250, 10, ""}, {250, 10, "All"}, {300, 60, ""}, {300, 60, "All"}},
	span:   330 * time.Second,
	faults: func(c *cluster, s *schedule) {
		rng := rand.New(rand.NewPCG(1, 2))
		outage := [2]time.Duration{230 * time.Second, 250 * time.Second}
		pause := [2]time.Duration{195 * time.Second, 201 * time.Second}
		for at := 10 * time.Second; at < 320*time.Second; at += time.Duration(8+rng.IntN(5)) * time.Second {
			if at > outage[0]-5*time.Second && at < outage[1]+3*time.Second ||
				at > pause[0]-5*time.Second && at < pause[1]+3*time.Second {
				continue
			}
			i := rng.IntN(len(c.planners))
			s.at(at, fmt.Sprint("kill -9 planner-", i), func() { c.killPlanner(i) })
			s.at(at+time.Duration(1+rng.IntN(3))*time.Second, fmt.Sprint("start planner-", i), func() { c.startPlanner(i) })
		}
		for at := 25 * time.Second; at < 320*time.Second; at += 40 * time.Second {
			i := int(at/(40*time.Second)) % len(c.workers)
			s.at(at, fmt.Sprint("kill -9 worker-", i), func() { c.killWorker(i) })
			s.at(at+2*time.Second, fmt.Sprint("start worker-", i), func() { c.startWorker(i) })
		}
		s.at(100*time.Second, "restart redis-server", c.restartRedis)
		s.at(160*time.Second, "restart the NATS server", c.restartNATS)
		s.at(pause[0], "SIGSTOP planner-0", func() { c.pausePlanner(0) })
		s.at(pause[1], "SIGCONT planner-0", func() { c.resumePlanner(0) })
		s.at(outage[0], "kill -9 every planner", func() {
			for i := range c.planners {
				if c.planners[i].Running() {
					c.killPlanner(i)
				}
			}
		})
		s.at(outage[1], "start every planner", func() {
			for i := range c.planners {
				c.startPlanner(i)
			}
		})
	},
}

func TestChaos(t *testing.T) {
	p := short
	if os.Getenv("RESCHED_CHAOS") == "full" {
		p = full
	} else if testing.Short() {
		t.Skip("the short chaos run takes about a minute")
	}
	runProfile(t, p, single(t))
}

// runProfile starts the processes on the backends, puts the jobs, runs the faults, and
// accounts for every occurrence.
func runProfile(t *testing.T, p profile, back backends) {
	c := newCluster(t, p.planners, p.workers, back)
	c.ready()
	// Every schedule fires on whole seconds; faults happen half a second off them, so whether
	// a planner ran at an occurrence's time is never a matter of milliseconds.
	start := time.Now().Add(15 * time.Second).Truncate(time.Second)
	jobs := c.putJobs(p.groups, start, start.Add(p.span))
	t.Logf("%s run: %d jobs from %s to %s", p.name, len(jobs), start.Format(time.TimeOnly), start.Add(p.span).Format(time.TimeOnly))
	s := &schedule{t: t, origin: start.Add(500 * time.Millisecond)}
	p.faults(c, s)
	s.run()
	time.Sleep(time.Until(start.Add(p.span + 2*time.Second)))
	for i, pl := range c.planners { // a fault schedule ends with every process running
		if !pl.Running() {
			c.startPlanner(i)
		}
	}
	for i, w := range c.workers {
		if !w.Running() {
			c.startWorker(i)
		}
	}
	c.ready()
	c.quiet(3 * time.Minute)
	r := c.account(jobs, start.Add(p.span))
	report := r.String(p.name)
	t.Log("\n" + report)
	if path := os.Getenv("RESCHED_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
	r.check(t, cmp.Or(p.lateBound, liveLateBound))
}

// schedule runs faults at offsets from an origin.
type schedule struct {
	t      *testing.T
	origin time.Time
	steps  []step
}

type step struct {
	at   time.Duration
	what string
	do   func()
}

func (s *schedule) at(d time.Duration, what string, do func()) {
	s.steps = append(s.steps, step{d, what, do})
}

// run does the steps in time order, each at its time.
func (s *schedule) run() {
	for len(s.steps) > 0 {
		next := 0
		for i, st := range s.steps {
			if st.at < s.steps[next].at {
				next = i
			}
		}
		st := s.steps[next]
		s.steps = append(s.steps[:next], s.steps[next+1:]...)
		time.Sleep(time.Until(s.origin.Add(st.at)))
		s.t.Logf("%s %s", time.Now().Format("15:04:05.000"), st.what)
		st.do()
	}
}
