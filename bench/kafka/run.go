package main

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Results is run.json.
type Results struct {
	Started   time.Time
	Seconds   float64
	Rounds    int
	Load      Spread
	Backlogs  map[string]backlog
	Cells     []Cell
	Funnels   []Funnel
	Scaling   []ScaleCell
	Profiles  []Profile
	GOMAXPROC int
}

// Cell is one cell of canal's table: its rounds.
type Cell struct {
	Workload, Format string
	Layout           layout
	Runs             []SinkRun
}

// Funnel is the stage funnel of one workload and format: its rounds.
type Funnel struct {
	Workload, Format string
	Rounds           [][]Pass
}

// ScaleCell is one cell of the scaling section: its rounds.
type ScaleCell struct {
	Partitions, Consumers int
	Runs                  []ScaleRun
}

func has(section string) bool {
	for _, s := range strings.Split(*sections, ",") {
		if s == section {
			return true
		}
	}
	return false
}

func run() {
	b := setup()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var load loadSampler
	load.start(ctx)
	res := Results{Started: time.Now().UTC(), Rounds: *rounds, Backlogs: map[string]backlog{}}
	start := time.Now()
	save := func() {
		res.Seconds = time.Since(start).Seconds()
		res.Load = load.summary()
		data, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(filepath.Join(*out, "run.json"), data, 0o644); err != nil {
			log.Fatal(err)
		}
	}

	b.createTables()
	// One workload at a time: a sink runs past its backlog's end (it
	// streams on until stopped), so no later backlog may follow it in the
	// binary log while it is measured. Within a workload the cells run
	// interleaved, round after round.
	wls := []struct {
		name    string
		layouts []layout
		formats []string
		write   func() backlog
	}{
		{"mixed", []layout{{1, 1}, {1, 3}, {2, 1}, {2, 3}}, []string{"debezium", "json"}, func() backlog { return b.mixed(*cycles) }},
		// One table: a second topic would stay empty.
		{"inserts", []layout{{1, 1}, {1, 3}}, []string{"debezium"}, func() backlog { return b.batchInserts("inserts", *inserts, 10_000_000) }},
	}
	for _, wl := range wls {
		bl := wl.write()
		res.Backlogs[wl.name] = bl
		log.Printf("%s: %d changes in %d transactions written in %.1f s", wl.name, bl.Changes, bl.Txns, bl.WriteSecs)
		// A first sink run warms the broker and the client (topic
		// creation, the transaction coordinator); it is not reported.
		b.sinkRun(bl, layout{1, 1}, "debezium", "")
		if has("throughput") {
			first := len(res.Cells)
			for _, l := range wl.layouts {
				for _, f := range []string{"debezium", "json"} {
					res.Cells = append(res.Cells, Cell{Workload: wl.name, Format: f, Layout: l})
				}
			}
			for r := 0; r < *rounds; r++ {
				for i := first; i < len(res.Cells); i++ {
					c := &res.Cells[i]
					sr := b.sinkRun(bl, c.Layout, c.Format, "")
					log.Printf("round %d %s %s %s: %.0f changes/s %.2f MB/s (%.2f s, first commit %.2f s)", r+1, c.Workload,
						c.Layout, c.Format, sr.ChangesPerS, sr.MBPerS, sr.Seconds, sr.FirstCommit)
					c.Runs = append(c.Runs, sr)
				}
				save()
			}
		}
		if has("funnel") {
			first := len(res.Funnels)
			for _, f := range wl.formats {
				res.Funnels = append(res.Funnels, Funnel{Workload: wl.name, Format: f})
			}
			for r := 0; r < *rounds; r++ {
				for i := first; i < len(res.Funnels); i++ {
					f := &res.Funnels[i]
					passes := b.funnelRound(bl, f.Format)
					for _, p := range passes {
						log.Printf("round %d funnel %s %s: %-24s %.2f s %d rows, CPU %.2f s", r+1, f.Workload, f.Format, p.Stage, p.Seconds, p.Rows, p.CPU["bench"])
					}
					f.Rounds = append(f.Rounds, passes)
				}
				save()
			}
		}
		if has("profile") {
			for _, f := range wl.formats {
				pr := b.profileRun(bl, f)
				log.Printf("profile %s %s: %+v", wl.name, f, pr.Stages)
				res.Profiles = append(res.Profiles, pr)
			}
			save()
		}
	}
	if has("scaling") {
		bl := b.batchInserts("scaling", *scaleRows, 50_000_000)
		res.Backlogs["scaling"] = bl
		for _, p := range []int{1, 4, 8, 16} {
			for _, c := range []int{1, 2} {
				res.Scaling = append(res.Scaling, ScaleCell{Partitions: p, Consumers: c})
			}
		}
		for r := 0; r < *rounds; r++ {
			for i := range res.Scaling {
				c := &res.Scaling[i]
				sr := b.scaleRun(bl, c.Partitions, c.Consumers)
				log.Printf("round %d scaling %d partitions %d consumers: %.0f rows/s (%.2f s; sink %.2f s)", r+1, c.Partitions,
					c.Consumers, sr.RowsPerS, sr.Seconds, sr.SinkSeconds)
				c.Runs = append(c.Runs, sr)
			}
			save()
		}
	}
	save()
}
