package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// consume is one member of a consumer group (read_committed, from the
// topic's start). It prints "a N" whenever the number of partitions it
// owns changes and "n COUNT LAST_UNIX_NANO" every 20 ms; it stops when
// its stdin closes.
func consume(args []string) {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	brokers := fs.String("brokers", "", "")
	topic := fs.String("topic", "", "")
	group := fs.String("group", "", "")
	fs.Parse(args)
	var mu sync.Mutex
	owned := map[int32]bool{}
	w := bufio.NewWriter(os.Stdout)
	say := func(format string, a ...any) {
		fmt.Fprintf(w, format+"\n", a...)
		w.Flush()
	}
	change := func(ps map[string][]int32, add bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range ps[*topic] {
			if add {
				owned[p] = true
			} else {
				delete(owned, p)
			}
		}
		say("a %d", len(owned))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(*brokers), kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A read_committed fetch waiting on the broker is not woken when a
		// commit makes records visible: it returns at its max wait (5 s in
		// franz-go, 500 ms in the Java client), which would be all we measured.
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { change(ps, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { change(ps, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { change(ps, false) }))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	var count, last atomic.Int64
	report := func() {
		mu.Lock()
		say("n %d %d", count.Load(), last.Load())
		mu.Unlock()
	}
	// A ticker reports, not the poll loop: PollRecords blocks once the
	// topic has nothing more, and the last count must still be seen.
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil {
			<-t.C
			report()
		}
	}()
	for ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, 10000)
		if n := int64(fetches.NumRecords()); n > 0 {
			last.Store(time.Now().UnixNano())
			count.Add(n)
		}
	}
	report()
	cl.Close()
}

// member is a running consumer process.
type member struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	owned int
	seen  bool // printed an assignment
	count int64
	last  int64
}

func startMember(topic, group string) *member {
	m := &member{cmd: exec.Command(os.Args[0], "consume", "-brokers", *brokers, "-topic", topic, "-group", group)}
	m.cmd.Stderr = os.Stderr
	var err error
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		log.Fatal(err)
	}
	outp, err := m.cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		log.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(outp)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			m.mu.Lock()
			switch {
			case len(f) == 2 && f[0] == "a":
				m.owned, _ = strconv.Atoi(f[1])
				m.seen = true
			case len(f) == 3 && f[0] == "n":
				m.count, _ = strconv.ParseInt(f[1], 10, 64)
				m.last, _ = strconv.ParseInt(f[2], 10, 64)
			}
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *member) stop() {
	m.stdin.Close()
	done := make(chan struct{})
	go func() { m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		m.cmd.Process.Kill()
		<-done
	}
}

// ScaleRun is one end-to-end run of the scaling section.
type ScaleRun struct {
	Partitions, Consumers int
	Seconds               float64 // sink start to the last record consumed
	SinkSeconds           float64 // sink start to all committed
	Records               int64
	RowsPerS              float64
}

// scaleRun starts a group of consumers on a fresh topic of partitions,
// waits until the group owns every partition, then runs a sink over bl
// into the topic and waits until the group has consumed every change.
func (b *bench) scaleRun(bl backlog, partitions, consumers int) ScaleRun {
	b.seq++
	prefix := fmt.Sprintf("kbs%d-%d", time.Now().Unix()%100000, b.seq)
	topic := prefix + ".rows"
	b.createTopic(topic, partitions, nil)
	var ms []*member
	defer func() {
		for _, m := range ms {
			m.stop()
		}
	}()
	for c := 0; c < consumers; c++ {
		ms = append(ms, startMember(topic, prefix+"-group"))
	}
	// The group is settled when its members own every partition and each
	// member that can have a partition has one.
	deadline := time.Now().Add(60 * time.Second)
	for {
		total, with := 0, 0
		for _, m := range ms {
			m.mu.Lock()
			total += m.owned
			if m.owned > 0 {
				with++
			}
			m.mu.Unlock()
		}
		if total == partitions && with == min(partitions, consumers) {
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("scaling: group of %d on %d partitions did not settle", consumers, partitions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	r := b.sinkRun(bl, layout{1, partitions}, "debezium", topic)
	out := ScaleRun{Partitions: partitions, Consumers: consumers, SinkSeconds: r.Seconds}
	for time.Since(start) < 3*time.Minute {
		var n, last int64
		for _, m := range ms {
			m.mu.Lock()
			n += m.count
			last = max(last, m.last)
			m.mu.Unlock()
		}
		if n >= bl.Changes {
			out.Records = n
			out.Seconds = time.Unix(0, last).Sub(start).Seconds()
			out.RowsPerS = float64(bl.Changes) / out.Seconds
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Fatalf("scaling: %d partitions, %d consumers: not all consumed", partitions, consumers)
	return out
}
