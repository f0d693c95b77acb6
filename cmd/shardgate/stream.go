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
)

// streamCmd runs the Kafka sinks of ks.yaml's streams (all, or the one
// -name names) in this process until SIGTERM or SIGINT. A sink that fails
// is run again after a pause that doubles up to 30 s (kafkasink.Supervisor,
// as in the proxy): it resumes from the positions it committed in Kafka.
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
	sources, names := changestream.Sources(cfg), changestream.Names(cfg)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex // serialises the lines written to w
		say = func(format string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339)}, a...)...)
		}
	)
	for _, s := range streams {
		sup := &kafkasink.Supervisor{Stream: s, Names: names,
			Sources: func() []changestream.Source { return sources },
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
