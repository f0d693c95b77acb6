package kafkasink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
)

// Supervisor keeps one stream's sink running: a Run that fails is started
// again, from the positions committed in Kafka, after a pause that doubles
// (MinPause to MaxPause) while the runs commit nothing and starts over at
// MinPause after a run that committed. The proxy (proxy/server) and
// `shardgate stream` both run their sinks through it.
//
// The exported fields are set before Run and not changed after; Status
// and Run may be called from any goroutine.
type Supervisor struct {
	Stream config.Stream
	// Sources returns the nodes a run reads, asked at each run's start (a
	// node's master may have moved since the last one).
	Sources func() []changestream.Source
	// Names maps physical tables to logical ones (changestream.Names).
	Names func(db, table string) string
	// Event, when set, is told of each run's start and end (Run's
	// goroutine calls it; it must not block).
	Event func(Event)
	// MinPause and MaxPause bound the pause after a failure (defaults 1 s
	// and 30 s).
	MinPause, MaxPause time.Duration
	// Knobs are given to each run's Sink.
	Knobs Knobs
	// Cutovers is given to each run's Sink (Sink.Cutovers).
	Cutovers func() []Cutover

	mu     sync.Mutex // guards what follows
	state  string
	since  time.Time
	cur    *Sink // the sink of the current or last run
	prev   *Sink // the last run that reached its nodes, while cur has not yet
	runs   int
	done   Stats // the counts of the runs that ended
	err    string
	errAt  time.Time
	failed int
}

// Supervisor states (Status.State).
const (
	StateRunning = "running" // a run is under way
	StateWaiting = "waiting" // the last run failed; the next starts after a pause
	StateStopped = "stopped" // Run has not started or has returned
)

// Event is a run's start (Err nil, Pause 0, Started true), or its end:
// failed (Err, and the Pause before the next) or stopped (Err nil).
type Event struct {
	Stream  string
	Started bool
	Nodes   int // a start's sources
	Err     error
	Pause   time.Duration
	Stats   Stats // an end's run
}

// Status is what a Supervisor reports of its stream.
type Status struct {
	Name  string
	State string
	// Since is when State began.
	Since time.Time
	// Runs counts the runs started; Failures those that failed.
	Runs, Failures int
	// LastErr is the last failure's error ("" if none), at LastErrAt.
	LastErr   string
	LastErrAt time.Time
	// Stats are the current (or last) run's, with its per-node lag;
	// Total adds the counts of every run (Nodes and Err are the current
	// run's).
	Stats, Total Stats
}

// Status returns the stream's state and counts; safe while Run runs.
func (v *Supervisor) Status() Status {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := Status{Name: v.Stream.Name, State: v.state, Since: v.since, Runs: v.runs, Failures: v.failed,
		LastErr: v.err, LastErrAt: v.errAt, Total: v.done}
	if st.State == "" {
		st.State = StateStopped
	}
	if v.cur != nil {
		st.Stats = v.cur.Stats()
		if len(st.Stats.Nodes) == 0 && v.prev != nil {
			// A run that has not read its positions yet (the broker
			// is away) shows the lag where the last run left it: the
			// time-based lag keeps growing, Behind is the last poll's.
			st.Stats.Nodes = v.prev.Stats().Nodes
		}
		if v.state == StateRunning {
			addCounts(&st.Total, st.Stats)
		}
		st.Total.Nodes, st.Total.Err = st.Stats.Nodes, st.Stats.Err
	}
	return st
}

func addCounts(to *Stats, st Stats) {
	to.Commits += st.Commits
	to.Transactions += st.Transactions
	to.Records += st.Records
	to.Bytes += st.Bytes
	to.Changes += st.Changes
	to.SnapshotRows += st.SnapshotRows
}

func (v *Supervisor) set(state string, cur *Sink) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.state, v.since = state, time.Now()
	if cur != nil {
		if v.cur != nil && len(v.cur.Stats().Nodes) > 0 {
			v.prev = v.cur
		}
		v.cur = cur
		v.runs++
	}
}

// Run runs the stream's sink until ctx ends, again after each failure.
func (v *Supervisor) Run(ctx context.Context) {
	minPause, maxPause := v.MinPause, v.MaxPause
	if minPause <= 0 {
		minPause = time.Second
	}
	if maxPause < minPause {
		maxPause = max(30*time.Second, minPause)
	}
	event := func(e Event) {
		e.Stream = v.Stream.Name
		if v.Event != nil {
			v.Event(e)
		}
	}
	defer v.set(StateStopped, nil)
	pause := minPause
	for ctx.Err() == nil {
		sources := v.Sources()
		sink := New(v.Stream, sources, v.Names)
		sink.Knobs = v.Knobs
		sink.Cutovers = v.Cutovers
		v.set(StateRunning, sink)
		event(Event{Started: true, Nodes: len(sources)})
		err := sink.Run(ctx)
		if err == nil && ctx.Err() == nil {
			// Run ends without an error only when ctx ends or its
			// subscription closed on its own: run it again.
			err = fmt.Errorf("stream %s: the sink stopped on its own", v.Stream.Name)
		}
		st := sink.Stats()
		// The run's counts move to done with the state's change, so
		// Status never counts them twice.
		v.mu.Lock()
		addCounts(&v.done, st)
		v.state, v.since = StateStopped, time.Now()
		if err != nil {
			v.state, v.err, v.errAt = StateWaiting, err.Error(), v.since
			v.failed++
		}
		v.mu.Unlock()
		if err == nil {
			event(Event{Stats: st})
			return
		}
		if st.Commits > 0 {
			pause = minPause
		}
		event(Event{Err: err, Pause: pause, Stats: st})
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		if st.Commits == 0 {
			pause = min(2*pause, maxPause)
		}
	}
}
