package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/kafkasink"
	"github.com/shardgate/shardgate/move"
)

// streamCmd runs the Kafka sinks of ks.yaml's streams (all, or the one
// -name names) in this process until SIGTERM or SIGINT. A sink that fails
// is run again after a pause that doubles up to 30 s (kafkasink.Supervisor,
// as in the proxy): it resumes from the positions it committed in Kafka.
// As the proxy's sinks, they read the workflows in the sidecar (streamFlows)
// to name the subtables of resharded tables and to order their cutovers.
func streamCmd(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	path := fs.String("config", "etc/ks.yaml", "the proxy's configuration `FILE` (its nodes, shard rules and streams:)")
	name := fs.String("name", "", "run only the stream `NAME` (default: every stream of the file)")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("stream", "takes no arguments: shardgate stream -config FILE [-name NAME]")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	streams := cfg.Streams
	if *name != "" {
		s := cfg.Stream(*name)
		if s == nil {
			return fmt.Errorf("%s has no stream %q", *path, *name)
		}
		streams = []config.Stream{*s}
	}
	if len(streams) == 0 {
		return fmt.Errorf("%s defines no streams", *path)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex // serialises the lines written to w
		say = func(format string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339)}, a...)...)
		}
	)
	sources, flows := changestream.Sources(cfg), newStreamFlows(ctx, cfg, say)
	defer flows.close()
	for _, s := range streams {
		sup := &kafkasink.Supervisor{Stream: s, Names: flows.names, Cutovers: flows.cutovers,
			Sources: func() []changestream.Source { flows.cutovers(); return sources },
			Event: func(e kafkasink.Event) {
				switch {
				case e.Started:
					say("stream %s: running (brokers %v, %d nodes)", e.Stream, s.Brokers, e.Nodes)
				case e.Err == nil:
					say("stream %s: stopped after %d commits (%d source transactions, %d records)", e.Stream, e.Stats.Commits, e.Stats.Transactions, e.Stats.Records)
				default:
					say("stream %s: %v; again in %v", e.Stream, e.Err, e.Pause)
				}
			}}
		wg.Go(func() { sup.Run(ctx) })
	}
	wg.Wait()
	return nil
}

// streamFlows gives the sinks of `shardgate stream` what the workflows in
// the sidecar of ks.yaml tell them (move.ForStreams), as the proxy gives
// its own: the names of the subtables of every workflow's old and new
// rules, and the reshard cutovers (kafkasink.Cutover). The workflows are
// read again at each run's start (Sources), when a sink meets a subtable
// its order has not seen (Cutovers), and when a table the names do not
// know appears for the first time (a reshard started since). Without a
// sidecar node (no schemas) it names by ks.yaml's rules only.
type streamFlows struct {
	ctx   context.Context
	cfg   *config.Config
	say   func(format string, a ...any)
	store *move.Store // nil without a sidecar node

	mu    sync.Mutex
	rules []config.ShardRule // the workflows' rules seen
	fn    func(db, table string) string
	cuts  []kafkasink.Cutover
	asked map[string]bool // the unknown tables the workflows were read again for
}

func newStreamFlows(ctx context.Context, cfg *config.Config, say func(string, ...any)) *streamFlows {
	f := &streamFlows{ctx: ctx, cfg: cfg, say: say, fn: changestream.Names(cfg), asked: map[string]bool{}}
	node := cfg.Sidecar.Node
	if node == "" && len(cfg.Schemas) > 0 {
		node = cfg.Schemas[0].Default
	}
	for _, n := range cfg.Nodes {
		if n.Name == node {
			f.store = move.NewStore(move.Endpoint{Addr: n.Master, User: n.User, Password: n.Password}, cfg.Sidecar.DB)
		}
	}
	return f
}

func (f *streamFlows) close() {
	if f.store != nil {
		f.store.Close()
	}
}

// refresh reads the workflows; on an error the rules and cutovers read
// before stay.
func (f *streamFlows) refresh() {
	if f.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	ws, err := f.store.List(ctx)
	if err != nil {
		f.say("streams: cannot read the workflows in the sidecar (subtables named by the rules seen so far): %v", err)
		return
	}
	rules, cs := move.ForStreams(ws)
	cuts := make([]kafkasink.Cutover, 0, len(cs))
	for _, c := range cs {
		cuts = append(cuts, kafkasink.Cutover(c))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var added bool
	if f.rules, added = move.AddRules(f.rules, rules); added {
		f.fn = changestream.NamesWith(f.cfg, f.rules...)
	}
	f.cuts = cuts
}

// cutovers reads the workflows again and returns their cutovers
// (kafkasink.Supervisor.Cutovers).
func (f *streamFlows) cutovers() []kafkasink.Cutover {
	f.refresh()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cuts
}

// names names a table (kafkasink.Supervisor.Names); a table it does not
// know makes it read the workflows again, once per table.
func (f *streamFlows) names(db, table string) string {
	f.mu.Lock()
	l := f.fn(db, table)
	again := f.store != nil && l == db+"."+table && !f.asked[l]
	if again {
		f.asked[l] = true
	}
	f.mu.Unlock()
	if !again {
		return l
	}
	f.refresh()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fn(db, table)
}
