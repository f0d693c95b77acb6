package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/kafkasink"
)

// Pass is one pass of the funnel: it reads the backlog's GTID range of
// both nodes (in parallel) and goes one stage further than the pass
// before, so a stage's own cost is its pass less the one before.
type Pass struct {
	Stage   string
	Seconds float64
	Rows    int64
	Events  int64
	Bytes   int64 // binlog bytes (receive, decode) or record bytes (serialize on)
	CPU     cpu
}

// funnelRound runs every pass once over bl in format, then the sink
// itself (1 topic x 1 partition), then the anchor.
func (b *bench) funnelRound(bl backlog, format string) []Pass {
	var passes []Pass
	counts := map[string]int64{}
	measure := func(stage string, f func(p *Pass)) {
		p := Pass{Stage: stage}
		c0 := readCPU()
		start := time.Now()
		f(&p)
		p.Seconds = time.Since(start).Seconds()
		p.CPU = readCPU().since(c0)
		passes = append(passes, p)
	}
	measure("decode", func(p *Pass) { b.binlogPass(bl, false, counts, p) })
	receive := passes[0]
	passes = passes[:0]
	measure("receive", func(p *Pass) { b.binlogPass(bl, true, counts, p) })
	passes = append(passes, receive)
	passes[0].Rows = receive.Rows // the rows the raw events hold
	measure("route", func(p *Pass) { b.streamPass(bl, format, nil, p, nil) })
	var recs []*kgo.Record
	var ends []int
	measure("serialize", func(p *Pass) { b.streamPass(bl, format, &recs, p, &ends) })
	measure("produce", func(p *Pass) { b.producePass(bl, format, p) })
	measure("commit (the sink)", func(p *Pass) {
		r := b.sinkRun(bl, layout{1, 1}, format, "")
		p.Rows, p.Bytes = r.Changes, r.Bytes
	})
	measure("anchor: franz-go alone", func(p *Pass) { b.anchor(recs, ends, p) })
	return passes
}

// binlogPass reads each node's range with go-mysql alone: decoding rows
// up to bl.To (counting events), or raw, stopping after the event counts
// the decoding pass found.
func (b *bench) binlogPass(bl backlog, raw bool, counts map[string]int64, p *Pass) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range b.srcs {
		wg.Go(func() {
			host, port, _ := net.SplitHostPort(s.Addr)
			pn, _ := strconv.Atoi(port)
			syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: uint32(3_000_000 + i + int(time.Now().UnixNano()%1000)*10),
				Flavor: gmysql.MariaDBFlavor, Host: host, Port: uint16(pn), User: s.User, Password: s.Password, RawModeEnabled: raw,
				Logger: quiet()})
			defer syncer.Close()
			set, _ := gmysql.ParseMariadbGTIDSet(bl.From[s.Node])
			end, _ := gmysql.ParseMariadbGTIDSet(bl.To[s.Node])
			cur := set.(*gmysql.MariadbGTIDSet)
			if cur.Contain(end) {
				return
			}
			st, err := syncer.StartSyncGTID(cur.Clone())
			if err != nil {
				log.Fatal(err)
			}
			var events, rows, bytes int64
			var gtid *gmysql.MariadbGTID
		loop:
			for {
				ev, err := st.GetEvent(context.Background())
				if err != nil {
					log.Fatal(err)
				}
				events++
				bytes += int64(len(ev.RawData))
				if raw {
					if events >= counts[s.Node] {
						break
					}
					continue
				}
				switch e := ev.Event.(type) {
				case *replication.MariadbGTIDEvent:
					g := e.GTID
					gtid = &g
				case *replication.RowsEvent:
					rows += int64(len(e.Rows))
					if e.Type() == replication.EnumRowsEventTypeUpdate {
						rows -= int64(len(e.Rows)) / 2
					}
				case *replication.XIDEvent, *replication.QueryEvent:
					if gtid != nil {
						cur.AddSet(gtid)
						gtid = nil
					}
					if cur.Contain(end) {
						break loop
					}
				}
			}
			mu.Lock()
			p.Events += events
			p.Rows += rows
			p.Bytes += bytes
			if !raw {
				counts[s.Node] = events
			}
			mu.Unlock()
		})
	}
	wg.Wait()
}

// streamPass reads the range through changestream as the sink subscribes
// (marks, its tables, the plain line encoded by the readers for format
// json); with recs it also encodes each change as the sink does and keeps
// the records, ends marking each source transaction's last record.
func (b *bench) streamPass(bl backlog, format string, recs *[]*kgo.Record, p *Pass, ends *[]int) {
	changes, errc, err := changestream.Subscribe(context.Background(), b.srcs, b.names, changestream.Options{
		Tables: bl.Tables, From: bl.From, Until: bl.To, Marks: true, Encode: recs != nil && format == config.FormatJSON, Buffer: 4096})
	if err != nil {
		log.Fatal(err)
	}
	var enc func(ch *changestream.Change, total, table int) ([]byte, []byte, error)
	if recs != nil {
		enc = kafkasink.Encoder(stream("anchor", format))
	}
	held := map[string][]changestream.Change{}
	for ch := range changes {
		if ch.Op != "mark" {
			p.Rows++
			if enc != nil {
				held[ch.Node] = append(held[ch.Node], ch)
			}
			continue
		}
		if enc == nil {
			continue
		}
		rows := held[ch.Node]
		held[ch.Node] = rows[:0]
		perTable := map[string]int{}
		for i := range rows {
			perTable[rows[i].Table]++
			k, v, err := enc(&rows[i], i+1, perTable[rows[i].Table])
			if err != nil {
				log.Fatal(err)
			}
			p.Bytes += int64(len(k) + len(v))
			*recs = append(*recs, &kgo.Record{Key: k, Value: v})
		}
		*ends = append(*ends, len(*recs))
	}
	if err := <-errc; err != nil {
		log.Fatal(err)
	}
}

// stream is a stream definition with the sink's defaults.
func stream(name, format string) config.Stream {
	st := config.Stream{Name: name, Brokers: []string{*brokers}, Format: format, Partitions: 1}
	defaults(&st)
	return st
}

// producePass is the serialize pass plus an idempotent producer (acks
// all, the sink's linger) into a fresh 1-partition topic, flushed at the
// end: the sink without transactions, positions and commits.
func (b *bench) producePass(bl backlog, format string, p *Pass) {
	b.seq++
	topic := fmt.Sprintf("kb-produce-%d-%d", time.Now().Unix()%100000, b.seq)
	b.createTopic(topic, 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(*brokers), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond), // as the sink: a fresh topic must not wait 5 s for metadata
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	changes, errc, err := changestream.Subscribe(context.Background(), b.srcs, b.names, changestream.Options{
		Tables: bl.Tables, From: bl.From, Until: bl.To, Marks: true, Encode: format == config.FormatJSON, Buffer: 4096})
	if err != nil {
		log.Fatal(err)
	}
	enc := kafkasink.Encoder(stream("anchor", format))
	held := map[string][]changestream.Change{}
	var perr error
	var mu sync.Mutex
	for ch := range changes {
		if ch.Op != "mark" {
			held[ch.Node] = append(held[ch.Node], ch)
			continue
		}
		rows := held[ch.Node]
		held[ch.Node] = rows[:0]
		perTable := map[string]int{}
		for i := range rows {
			perTable[rows[i].Table]++
			k, v, err := enc(&rows[i], i+1, perTable[rows[i].Table])
			if err != nil {
				log.Fatal(err)
			}
			p.Rows++
			p.Bytes += int64(len(k) + len(v))
			cl.Produce(context.Background(), &kgo.Record{Key: k, Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
			})
		}
	}
	if err := <-errc; err != nil {
		log.Fatal(err)
	}
	if err := cl.Flush(context.Background()); err != nil || perr != nil {
		log.Fatalf("produce pass: %v %v", err, perr)
	}
}

// anchor produces the serialize pass's records with franz-go alone: a
// transactional producer configured as the sink's (acks all, linger 5 ms),
// one Kafka transaction per 1000 source transactions or 4 MiB, as the
// sink's defaults batch, into a fresh 1-partition topic. No binary log.
func (b *bench) anchor(recs []*kgo.Record, ends []int, p *Pass) {
	b.seq++
	topic := fmt.Sprintf("kb-anchor-%d-%d", time.Now().Unix()%100000, b.seq)
	b.createTopic(topic, 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(*brokers), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond), // as the sink: a fresh topic must not wait 5 s for metadata
		kgo.TransactionalID(topic), kgo.TransactionTimeout(5*time.Minute), kgo.DefaultProduceTopic(topic))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		log.Fatal(err)
	}
	var perr error
	var mu sync.Mutex
	commit := func() {
		if err := cl.Flush(ctx); err != nil || perr != nil {
			log.Fatalf("anchor: %v %v", err, perr)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			log.Fatal(err)
		}
	}
	open, txns, bytes := false, 0, 0
	i := 0
	for _, end := range ends {
		for ; i < end; i++ {
			if !open {
				if err := cl.BeginTransaction(); err != nil {
					log.Fatal(err)
				}
				open = true
			}
			r := &kgo.Record{Key: recs[i].Key, Value: recs[i].Value}
			bytes += len(r.Key) + len(r.Value)
			p.Rows++
			p.Bytes += int64(len(r.Key) + len(r.Value))
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
			})
		}
		txns++
		if txns >= 1000 || bytes >= 4<<20 {
			commit()
			open, txns, bytes = false, 0, 0
		}
	}
	if open {
		commit()
	}
}

// Profile is where the sink's own process spent its CPU during one run,
// by stage: each sample of a CPU profile goes to the stage of the
// innermost frame that names one (profileStages).
type Profile struct {
	Workload, Format string
	Seconds          float64 // the run's wall time
	Changes          int64
	Stages           []ProfileStage
}

// ProfileStage is one stage's CPU in a profiled run.
type ProfileStage struct {
	Stage   string
	Seconds float64
}

// profileStages maps frames to stages, checked from the leaf up; the
// first rule a frame matches decides. Commit is checked on the whole
// stack first (the positions and the commit's own produce are commit).
var profileStages = []struct {
	stage string
	re    *regexp.Regexp
}{
	{"serialize", regexp.MustCompile(`^encoding/json\.|kafkasink\.\(\*encoder\)|changestream\.encode|changestream\.\(\*reader\)\.encode`)},
	{"produce", regexp.MustCompile(`twmb/franz-go`)},
	{"decode", regexp.MustCompile(`go-mysql/replication\.\(\*BinlogParser\)|go-mysql/replication\.\(\*RowsEvent\)|go-mysql/replication\.\(\*TableMapEvent\)|go-mysql/replication\.decode`)},
	{"receive", regexp.MustCompile(`go-mysql/`)},
	{"route", regexp.MustCompile(`shardgate/changestream\.`)},
	{"sink loop", regexp.MustCompile(`shardgate/kafkasink\.`)},
	{"GC", regexp.MustCompile(`^runtime\.gcBgMarkWorker|^runtime\.bgsweep|^runtime\.bgscavenge`)},
}

var commitRE = regexp.MustCompile(`kafkasink\.\(\*writer\)\.commit|kgo\.\(\*Client\)\.EndTransaction`)

// profileRun runs the sink over bl (1 x 1) under a CPU profile, keeps
// the profile's -top output in the report directory, and sums its samples
// by stage.
func (b *bench) profileRun(bl backlog, format string) Profile {
	name := fmt.Sprintf("profile-%s-%s", bl.Name, format)
	path := filepath.Join(*out, name+".pb.gz")
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	r := b.sinkRun(bl, layout{1, 1}, format, "")
	pprof.StopCPUProfile()
	f.Close()
	pr := Profile{Workload: bl.Name, Format: format, Seconds: r.Seconds, Changes: r.Changes}
	if top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=40", os.Args[0], path).Output(); err == nil {
		os.WriteFile(filepath.Join(*out, name+"-top.txt"), top, 0o644)
	}
	traces, err := exec.Command("go", "tool", "pprof", "-traces", os.Args[0], path).Output()
	if err != nil {
		log.Printf("profile %s: go tool pprof -traces: %v", name, err)
		return pr
	}
	sums := map[string]float64{}
	for _, block := range strings.Split(string(traces), "-----------+-------------------------------------------------------") {
		var secs float64
		var frames []string
		for _, line := range strings.Split(block, "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			if d, err := time.ParseDuration(fields[0]); err == nil && len(fields) == 2 && secs == 0 {
				secs = d.Seconds()
				frames = append(frames, fields[1])
				continue
			}
			if secs > 0 && len(fields) == 1 {
				frames = append(frames, fields[0])
			}
		}
		if secs == 0 {
			continue
		}
		stage := "other (scheduler, syscalls)"
		for _, fr := range frames {
			if commitRE.MatchString(fr) {
				stage = "commit"
				break
			}
		}
		if stage != "commit" {
		frames:
			for _, fr := range frames {
				for _, rule := range profileStages {
					if rule.re.MatchString(fr) {
						stage = rule.stage
						break frames
					}
				}
			}
		}
		sums[stage] += secs
	}
	for _, st := range []string{"receive", "decode", "route", "serialize", "sink loop", "produce", "commit", "GC", "other (scheduler, syscalls)"} {
		pr.Stages = append(pr.Stages, ProfileStage{Stage: st, Seconds: sums[st]})
	}
	return pr
}
