package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

func fmtSpread(s Spread, prec int) string {
	if s.N == 0 {
		return "-"
	}
	if s.N == 1 {
		return fmt.Sprintf("%.*f", prec, s.Median)
	}
	return fmt.Sprintf("%.*f (%.*f-%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
}

func of[T any](runs []T, f func(T) float64) Spread {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	return spread(v)
}

func report() {
	var res Results
	data, err := os.ReadFile(filepath.Join(*out, "run.json"))
	if err != nil {
		log.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		log.Fatal(err)
	}
	var lags []LagRun
	if data, err := os.ReadFile(filepath.Join(*out, "lag.json")); err == nil {
		json.Unmarshal(data, &lags)
	}
	env, _ := os.ReadFile(filepath.Join(*out, "env.txt"))
	if first, err := os.ReadFile(filepath.Join(*out, "env-run.txt")); err == nil {
		env = append(append(first, "then, the lag section run again alone:\n"...), env...)
	}
	command, _ := os.ReadFile(filepath.Join(*out, "command.txt"))
	var w strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&w, format+"\n", a...) }

	p("# Kafka sink benchmark — %s UTC", res.Started.Format("2006-01-02 15:04"))
	p("")
	p("Made by `%s` (bench/kafka.sh, bench/kafka/). Raw data: `run.json` (every round of every cell and pass, with CPU", strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(command)), "\n", "`, then `")), " "))
	p("seconds per process), `lag.json` (with the /metrics series), `env.txt`, `ks.yaml` and `ks-lag.yaml`; the script's log")
	p("and sysbench's output (`*.log`) stay out of the tree (bench/results/README.md). Medians of %d rounds run interleaved (every cell of a workload once per", res.Rounds)
	p("round; one workload after the other, since a sink streams on past its backlog), with the range (min-max) in parentheses.")
	p("")
	p("Two MariaDB servers of the benchmark's own (bench/cluster.sh), one real Apache Kafka broker in KRaft mode")
	p("(scripts/kafka/broker.sh: the jars of `internal/kafkatest`, 1 GB heap), the sink in the benchmark process")
	p("(`kafkasink.New(...).Run`, the code `shardgate stream` and the proxy run) with the default batching: a Kafka")
	p("transaction per 1000 source transactions, 4 MiB or 100 ms, acks=all, transactional.")
	p("")
	p("**Machine load.** 2 cores shared with other agents' work: the 1-minute load average during `kafka run` was %s", fmtSpread(res.Load, 1))
	p("(median, range over 1 s samples). The broker (a JVM), both MariaDB servers, the consumers and the sink share the")
	p("two cores, so every figure below is a floor for this machine, not the sink's ceiling.")
	p("")
	p("```")
	p("%s", strings.TrimSpace(string(env)))
	p("```")
	p("")

	p("## 1. canal's table: changes/s and MB/s by topics x partitions")
	p("")
	p("Each rate is the sink's end to end over a backlog: the rows were written to the nodes' subtables before the sink")
	p("started, the sink started at the position before them (as if an earlier sink had committed it) and ran until its")
	p("committed positions covered them, so the rate is the sink's (binary log read, decode, route, encode, produce,")
	p("commit), not the writers'. Time counts from `Run` (producer init, fencing, reading the positions topic: %s s to the",
		fmtSpread(allFirst(res.Cells), 2))
	p("first commit) to the last commit; \"after start\" is the rate after the first commit. MB/s: key and value bytes committed.")
	p("")
	for name, bl := range res.Backlogs {
		if name == "scaling" {
			continue
		}
		p("- `%s`: %d changes in %d source transactions (written in %.1f s). %s", name, bl.Changes, bl.Txns, bl.WriteSecs, describe(name))
	}
	p("")
	p("| workload | topics x partitions | Debezium changes/s | MB/s | after start | json changes/s | MB/s | after start | sink CPU us/change (Debezium, json) |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for i := 0; i+1 < len(res.Cells); i += 2 {
		d, j := res.Cells[i], res.Cells[i+1]
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f, %.0f |", d.Workload, d.Layout,
			fmtSpread(of(d.Runs, func(r SinkRun) float64 { return r.ChangesPerS }), 0),
			fmtSpread(of(d.Runs, func(r SinkRun) float64 { return r.MBPerS }), 2),
			fmtSpread(of(d.Runs, func(r SinkRun) float64 { return r.SteadyRate }), 0),
			fmtSpread(of(j.Runs, func(r SinkRun) float64 { return r.ChangesPerS }), 0),
			fmtSpread(of(j.Runs, func(r SinkRun) float64 { return r.MBPerS }), 2),
			fmtSpread(of(j.Runs, func(r SinkRun) float64 { return r.SteadyRate }), 0),
			of(d.Runs, func(r SinkRun) float64 { return r.SinkCPUPerCh }).Median,
			of(j.Runs, func(r SinkRun) float64 { return r.SinkCPUPerCh }).Median)
	}
	p("")
	p("canal's published figures (24 cores, its own MQ sink, flat JSON): mixed DML 29.6k TPS 1 x 1, 17.5k 1 x 3, 21.6k 2 x 1,")
	p("16.8k 2 x 3; single-table batch inserts 59.6k 1 x 1, 45.1k 1 x 3. The batch-insert workload has one table, so it has")
	p("no 2-topic layout (canal publishes none either).")
	p("")
	p("Where the CPU went during the sink runs (CPU seconds per run, medians, Debezium 1 x 1):")
	p("")
	p("| workload | run s | sink process | broker | MariaDB (both) |")
	p("|---|---:|---:|---:|---:|")
	for _, c := range res.Cells {
		if c.Format != "debezium" || c.Layout != (layout{1, 1}) {
			continue
		}
		p("| %s | %.2f | %.2f | %.2f | %.2f |", c.Workload, of(c.Runs, func(r SinkRun) float64 { return r.Seconds }).Median,
			of(c.Runs, func(r SinkRun) float64 { return r.CPU["bench"] }).Median,
			of(c.Runs, func(r SinkRun) float64 { return r.CPU["broker"] }).Median,
			of(c.Runs, func(r SinkRun) float64 { return r.CPU["node1"] + r.CPU["node2"] }).Median)
	}
	p("")

	p("## 2. The stage funnel, and 5. the anchor: franz-go alone")
	p("")
	p("Each pass reads the same backlog (both nodes in parallel) and goes one stage further than the pass above it, as")
	p("bench/stream's change-stream funnel does: receive (go-mysql, raw events), decode (go-mysql, rows), route")
	p("(`changestream.Subscribe` as the sink subscribes: logical tables, marks at transaction ends), serialize (the")
	p("sink's own encoder, `kafkasink.Encoder`), produce (an idempotent franz-go producer, acks=all, the sink's 5 ms")
	p("linger, flushed at the end: no transactions), commit (the sink itself, 1 topic x 1 partition: transactional,")
	p("positions, commits). `own s` is the pass's time less the pass above; `CPU s` is the benchmark process's CPU")
	p("(user+system) over the pass, `own CPU` less the pass above, `share` that own CPU over the sink pass's CPU.")
	p("The anchor produces the serialize pass's records again with franz-go alone (no binary log): a transactional")
	p("producer with the sink's settings and batching (a Kafka transaction per 1000 source transactions or 4 MiB),")
	p("into a fresh 1-partition topic; the broker's CPU beside it. The passes are separate runs on a loaded machine, so")
	p("an own time or CPU below zero is noise: read the column for the large steps.")
	p("")
	for _, f := range res.Funnels {
		if len(f.Rounds) == 0 {
			continue
		}
		p("### %s, %s", f.Workload, f.Format)
		p("")
		p("| stage | s | own s | rows/s | MB/s | CPU s | own CPU s | share | broker CPU s | MariaDB CPU s |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		stages := len(f.Rounds[0])
		sinkIdx := stages - 2
		for si := 0; si < stages; si++ {
			col := func(g func(r []Pass) float64) Spread {
				v := make([]float64, 0, len(f.Rounds))
				for _, r := range f.Rounds {
					if len(r) == stages {
						v = append(v, g(r))
					}
				}
				return spread(v)
			}
			prev := si - 1
			if si == stages-1 {
				prev = -1 // the anchor stands alone
			}
			secs := col(func(r []Pass) float64 { return r[si].Seconds })
			own := col(func(r []Pass) float64 {
				if prev < 0 {
					return r[si].Seconds
				}
				return r[si].Seconds - r[prev].Seconds
			})
			cpuS := col(func(r []Pass) float64 { return r[si].CPU["bench"] })
			ownCPU := col(func(r []Pass) float64 {
				if prev < 0 {
					return r[si].CPU["bench"]
				}
				return r[si].CPU["bench"] - r[prev].CPU["bench"]
			})
			share := col(func(r []Pass) float64 {
				c := r[si].CPU["bench"]
				if prev >= 0 {
					c -= r[prev].CPU["bench"]
				}
				return 100 * c / r[sinkIdx].CPU["bench"]
			})
			rows := col(func(r []Pass) float64 { return float64(r[si].Rows) / r[si].Seconds })
			mb := col(func(r []Pass) float64 { return float64(r[si].Bytes) / r[si].Seconds / 1e6 })
			broker := col(func(r []Pass) float64 { return r[si].CPU["broker"] })
			maria := col(func(r []Pass) float64 { return r[si].CPU["node1"] + r[si].CPU["node2"] })
			shareS := fmt.Sprintf("%.0f%%", share.Median)
			if si == stages-1 {
				shareS = "-"
			}
			p("| %s | %s | %.3f | %s | %.1f | %.2f | %.2f | %s | %.2f | %.2f |", f.Rounds[0][si].Stage, fmtSpread(secs, 3), own.Median,
				fmtSpread(rows, 0), mb.Median, cpuS.Median, ownCPU.Median, shareS, broker.Median, maria.Median)
		}
		sink := spread(collect(f.Rounds, func(r []Pass) float64 { return float64(r[sinkIdx].Rows) / r[sinkIdx].Seconds }))
		anchor := spread(collect(f.Rounds, func(r []Pass) float64 { return float64(r[len(r)-1].Rows) / r[len(r)-1].Seconds }))
		ratio := spread(collect(f.Rounds, func(r []Pass) float64 {
			return (float64(r[sinkIdx].Rows) / r[sinkIdx].Seconds) / (float64(r[len(r)-1].Rows) / r[len(r)-1].Seconds)
		}))
		p("")
		p("The sink keeps %.2f (%.2f-%.2f) of franz-go's own rate on the same records (%.0f against %.0f changes/s, medians): the rest",
			ratio.Median, ratio.Min, ratio.Max, sink.Median, anchor.Median)
		p("is the binary log, decode, route and encode in front of the producer, and its start (producer init, positions read).")
		p("")
	}

	if len(res.Profiles) > 0 {
		p("### The sink's own CPU by stage (a profiled run)")
		p("")
		p("One more sink run per workload and format (1 x 1) under Go's CPU profiler: each sample goes to the stage of the")
		p("innermost frame that names one (go-mysql's event parsing: decode; the rest of go-mysql, socket reads: receive;")
		p("changestream: route; encoding/json and the sink's encoder: serialize; franz-go: produce; anything under the")
		p("sink's commit: commit; the sink's loop itself; the GC's own workers). Allocation inside a stage counts as that")
		p("stage; `profile-*-top.txt` has `go tool pprof -top` of each.")
		p("")
		head := "| stage |"
		sep := "|---|"
		for _, pr := range res.Profiles {
			head += fmt.Sprintf(" %s %s CPU s | share |", pr.Workload, pr.Format)
			sep += "---:|---:|"
		}
		p("%s", head)
		p("%s", sep)
		for i := range res.Profiles[0].Stages {
			row := "| " + res.Profiles[0].Stages[i].Stage + " |"
			for _, pr := range res.Profiles {
				var total float64
				for _, st := range pr.Stages {
					total += st.Seconds
				}
				row += fmt.Sprintf(" %.2f | %.0f%% |", pr.Stages[i].Seconds, 100*pr.Stages[i].Seconds/max(total, 1e-9))
			}
			p("%s", row)
		}
		row := "| **run: wall s, changes** |"
		for _, pr := range res.Profiles {
			row += fmt.Sprintf(" %.2f | %d |", pr.Seconds, pr.Changes)
		}
		p("%s", row)
		p("")
	}

	p("## 3. Tunnel's scaling: partitions and consumer-group size")
	p("")
	if bl, ok := res.Backlogs["scaling"]; ok {
		p("A backlog of %d rows inserted into kb.orders in 100-row transactions, the Debezium envelope, into one topic", bl.Changes)
	}
	p("created with 1, 4, 8 or 16 partitions, read by a consumer group of 1 or 2 separate processes (`kafka consume`:")
	p("franz-go group consumer, read_committed, from the start, fetch max wait 100 ms). The group is settled (every partition owned) before the")
	p("sink starts; rows/s is the backlog over the time from the sink's start to the last record any member received.")
	p("`sink s` is the sink's own time to commit everything in the same run.")
	p("")
	p("| partitions | group of 1: rows/s | sink s | group of 2: rows/s | sink s |")
	p("|---:|---:|---:|---:|---:|")
	for i := 0; i+1 < len(res.Scaling); i += 2 {
		a, b := res.Scaling[i], res.Scaling[i+1]
		p("| %d | %s | %.2f | %s | %.2f |", a.Partitions,
			fmtSpread(of(a.Runs, func(r ScaleRun) float64 { return r.RowsPerS }), 0), of(a.Runs, func(r ScaleRun) float64 { return r.SinkSeconds }).Median,
			fmtSpread(of(b.Runs, func(r ScaleRun) float64 { return r.RowsPerS }), 0), of(b.Runs, func(r ScaleRun) float64 { return r.SinkSeconds }).Median)
	}
	p("")
	p("Tunnel's rows/s grow with partitions because each channel is read and written in parallel on machines of their")
	p("own. Here one sink writes every partition (a source is ordered per node, so one producer per stream) and the")
	p("consumers share the same two cores as the sink, the broker and MariaDB: more partitions spread records over more")
	p("batches and more consumers add processes, not cores.")
	p("")

	p("## 4. Lag under sysbench oltp_write_only through the proxy")
	p("")
	if len(lags) == 0 {
		p("Not run.")
	} else {
		p("The proxy (sbtest.sbtest1 hash-sharded 2+2 over the two nodes) runs a sink of `sbtest.sbtest1` from its `streams:`")
		p("(Debezium, 1 x 1, default batching), after the snapshot of the %d prepared rows; sysbench oltp_write_only, %d", *tableSize, lags[0].Threads)
		p("threads, %d s, through the proxy. Lag is the largest `shardgate_stream_lag_seconds` over the nodes (whole seconds:", lags[0].SysbenchSeconds)
		p("the binary log's timestamps), behind the summed `shardgate_stream_behind_transactions`, scraped from the proxy's /metrics")
		p("every 250 ms (`lag.json` has the series). The sink polls each node's head once a second, so `behind` at the end")
		p("counts up to a second of transactions it may already have committed; `caught up` is the time from sysbench's end")
		p("until lag and behind were both 0, which bounds the real lag at the end from above (the lag series only says")
		p("whole seconds). Ignored errors are the deadlocks and lock waits sysbench retries.")
		p("")
		p("| run | sysbench tps | queries/s | ignored errors | lag at end s | lag max s | behind at end | behind max | caught up after s | changes/s committed |")
		p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for i, l := range lags {
			p("| %d | %.0f | %.0f | %d | %.0f | %.0f | %d | %d | %.2f | %.0f |", i+1, l.TPS, l.QPS, l.Errors, l.LagEnd, l.LagMax, l.BehindEnd,
				l.BehindMax, l.CatchUpSeconds, l.ChangesDuring)
		}
	}
	p("")
	if err := os.WriteFile(filepath.Join(*out, "README.md"), []byte(w.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func collect(rounds [][]Pass, f func(r []Pass) float64) []float64 {
	var v []float64
	for _, r := range rounds {
		if len(r) > 2 {
			v = append(v, f(r))
		}
	}
	return v
}

func allFirst(cells []Cell) Spread {
	var v []float64
	for _, c := range cells {
		for _, r := range c.Runs {
			v = append(v, r.FirstCommit)
		}
	}
	return spread(v)
}

func describe(name string) string {
	switch name {
	case "mixed":
		return "Mixed DML over kb.orders and kb.items (hash on id, 2+2 subtables on two nodes), four writers; per cycle and subtable: a 50-row INSERT into each table (one transaction each), 25 single-row UPDATEs of each, 10 single-row DELETEs of each (autocommit)."
	case "inserts":
		return "Single-table batch inserts: 100-row INSERTs into kb.orders (one subtable each), four writers."
	}
	return ""
}
