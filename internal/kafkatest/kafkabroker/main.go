// Command kafkabroker runs a kafkatest broker outside a test, for the benchmarks (scripts/kafka/broker.sh), and
// writes the class archive that makes later brokers start faster (scripts/deps.sh kafka).
//
//	kafkabroker -dir DIR [-addr-file FILE] [-heap 1g] [-quick] [-prop key=value ...]
//	kafkabroker -class-archive
//
// The first form formats a new cluster in DIR (which must not hold one), runs the broker on free ports, prints
// its address on standard output once it answers, writes it to FILE if asked, and stops the broker (a controlled
// shutdown) on SIGINT or SIGTERM. The broker runs with both JIT compilers and G1 unless -quick is given.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/shardgate/shardgate/internal/kafkatest"
)

type props []string

func (p *props) String() string     { return fmt.Sprint(*p) }
func (p *props) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var (
		dir      = flag.String("dir", "", "the broker's directory (configuration, data, kafka.log); must not hold a broker yet")
		addrFile = flag.String("addr-file", "", "write the broker's address (host:port) to this file once it answers")
		heap     = flag.String("heap", "1g", "the JVM's -Xmx")
		quick    = flag.Bool("quick", false, "start fast and run slower (first JIT tier, serial GC), as tests do")
		archive  = flag.Bool("class-archive", false, "write the JVM class archive beside the cached jars and exit")
		extra    props
	)
	flag.Var(&extra, "prop", "an extra server property key=value (repeatable)")
	flag.Parse()
	if *archive {
		if err := kafkatest.WriteClassArchive(); err != nil {
			fmt.Fprintln(os.Stderr, "kafkabroker:", err)
			os.Exit(1)
		}
		return
	}
	if *dir == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	b, err := kafkatest.New(*dir, kafkatest.Options{Props: extra, Heap: *heap, Throughput: !*quick})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		os.Exit(1)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(b.Addr+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "kafkabroker:", err)
			b.Close()
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "kafkabroker: Kafka %s on %s ready in %.1f s (pid %d, log %s)\n",
		b.Version, b.Addr, b.StartTime().Seconds(), b.Pid(), b.Log)
	fmt.Println(b.Addr)
	<-sigs
	if err := b.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		os.Exit(1)
	}
}
