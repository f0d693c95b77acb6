// Command fleetprop measures how long a topology change takes to reach a
// fleet: it stores N versions of the fleet's ks.yaml in etcd (each with a
// different slow_log_time, a change every proxy applies), and for each
// times the interval from the store's answer to the moment every live
// proxy's member record says it applied that version. It prints each
// time, then the median, minimum and maximum (bench/fleet.sh).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/shardgate/shardgate/topo"
)

func main() {
	etcd := flag.String("etcd", "http://127.0.0.1:2379", "etcd endpoints, comma-separated")
	cluster := flag.String("cluster", "/shardgate/default", "the fleet's key prefix")
	n := flag.Int("n", 20, "changes")
	members := flag.Int("members", 3, "live proxies expected")
	timeout := flag.Duration("timeout", 30*time.Second, "how long one change may take to reach every proxy")
	flag.Parse()
	if err := run(*etcd, *cluster, *n, *members, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetprop:", err)
		os.Exit(1)
	}
}

func run(etcd, cluster string, n, want int, timeout time.Duration) error {
	ctx := context.Background()
	s, err := topo.Open(ctx, topo.Options{Endpoints: strings.Split(etcd, ","), Prefix: cluster})
	if err != nil {
		return err
	}
	defer s.Close()
	cur, err := s.Get(ctx)
	if err != nil {
		return err
	}
	live, err := s.Members(ctx)
	if err != nil {
		return err
	}
	if len(live) != want {
		return fmt.Errorf("%d live proxies under %s, want %d", len(live), cluster, want)
	}
	var times []time.Duration
	fmt.Println("| change | version | every proxy applied after |")
	fmt.Println("|---:|---:|---:|")
	for i := 1; i <= n; i++ {
		text := withSlowLog(string(cur.YAML), 100+i)
		rev, err := s.Put(ctx, []byte(text), -1)
		if err != nil {
			return err
		}
		stored := time.Now()
		for {
			live, err := s.Members(ctx)
			if err != nil {
				return err
			}
			done := len(live) >= want
			for _, m := range live {
				if m.Applied < rev {
					done = false
				}
				if m.Err != "" && m.Applied < rev {
					return fmt.Errorf("proxy %s refused version %d: %s", m.ID, rev, m.Err)
				}
			}
			if done {
				break
			}
			if time.Since(stored) > timeout {
				return fmt.Errorf("version %d not applied by every proxy after %v", rev, timeout)
			}
			time.Sleep(time.Millisecond)
		}
		d := time.Since(stored)
		times = append(times, d)
		fmt.Printf("| %d | %d | %.1f ms |\n", i, rev, ms(d))
		time.Sleep(200 * time.Millisecond) // changes apart, as an operator's are
	}
	slices.Sort(times)
	fmt.Printf("\n%d changes to %d proxies: median %.1f ms, min %.1f ms, max %.1f ms\n", n, want,
		ms(times[len(times)/2]), ms(times[0]), ms(times[len(times)-1]))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// withSlowLog returns the ks.yaml text with slow_log_time set to v.
func withSlowLog(text string, v int) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "slow_log_time:") {
			out = append(out, l)
		}
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n") + fmt.Sprintf("\nslow_log_time: %d\n", v)
}
