package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// LagRun is one sysbench run with the proxy's sink streaming its table.
type LagRun struct {
	TPS, QPS        float64
	Errors          int64
	LagEnd, LagMax  float64 // max over nodes of shardgate_stream_lag_seconds: at sysbench's end, and over the run
	BehindEnd       int64   // transactions behind (summed over nodes) at the end
	BehindMax       int64
	CatchUpSeconds  float64 // from sysbench's end until lag 0 and nothing behind
	ChangesDuring   float64 // changes committed during the run, per second
	Samples         int
	Series          []LagSample
	SysbenchSeconds int
	Threads         int
}

// LagSample is one scrape of /metrics.
type LagSample struct {
	T       float64 `json:"t"` // seconds since sysbench started
	Lag     float64 `json:"lag"`
	Behind  int64   `json:"behind"`
	Changes float64 `json:"changes"`
}

var metricRE = regexp.MustCompile(`^(shardgate_stream_\w+)\{([^}]*)\} (\S+)$`)

// scrape reads the stream series of /metrics: the largest lag and the
// summed transactions behind over the nodes, and changes committed.
func scrape() (lag float64, behind int64, changes float64, err error) {
	resp, err := http.Get("http://" + *proxyWeb + "/metrics")
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	found := false
	for sc.Scan() {
		m := metricRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		switch m[1] {
		case "shardgate_stream_lag_seconds":
			lag = max(lag, v)
			found = true
		case "shardgate_stream_behind_transactions":
			if v < 0 {
				behind = -1 << 40
			} else if behind >= 0 {
				behind += int64(v)
			}
		case "shardgate_stream_changes_total":
			changes += v
		}
	}
	if !found {
		return 0, 0, 0, fmt.Errorf("no shardgate_stream_lag_seconds in /metrics")
	}
	return lag, behind, changes, sc.Err()
}

// settle waits until the sink has nothing behind and no lag.
func settle(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < limit {
		lag, behind, _, err := scrape()
		if err == nil && lag == 0 && behind == 0 {
			return time.Since(start), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("the sink did not catch up within %s", limit)
}

func lagMain() {
	if _, err := settle(3 * time.Minute); err != nil {
		log.Fatal(err)
	}
	host, port, _ := strings.Cut(*proxyAddr, ":")
	var runs []LagRun
	for round := 0; round < *lagRounds; round++ {
		log.Printf("lag: round %d: sysbench oltp_write_only %d threads %d s", round+1, *threads, *secs)
		args := []string{"oltp_write_only", "--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
			"--mysql-user=shardgate", "--mysql-password=shardgate", "--mysql-db=sbtest", "--tables=1",
			fmt.Sprintf("--table-size=%d", *tableSize), "--auto-inc=off", fmt.Sprintf("--threads=%d", *threads),
			fmt.Sprintf("--time=%d", *secs), "--report-interval=0", "run"}
		cmd := exec.Command("sysbench", args...)
		ctx, stop := context.WithCancel(context.Background())
		r := LagRun{SysbenchSeconds: *secs, Threads: *threads}
		samples := make(chan LagSample, 1)
		start := time.Now()
		go func() {
			var list []LagSample
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for ctx.Err() == nil {
				if lag, behind, ch, err := scrape(); err == nil {
					list = append(list, LagSample{T: time.Since(start).Seconds(), Lag: lag, Behind: behind, Changes: ch})
				}
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
			r.Series = list
			samples <- LagSample{}
		}()
		_, _, c0, _ := scrape()
		outb, err := cmd.CombinedOutput()
		end := time.Now()
		lagEnd, behindEnd, c1, serr := scrape()
		stop()
		<-samples
		if err != nil {
			log.Fatalf("sysbench: %v\n%s", err, outb)
		}
		if serr != nil {
			log.Fatal(serr)
		}
		os.WriteFile(filepath.Join(*out, fmt.Sprintf("lag-sysbench-%d.log", round+1)), outb, 0o644)
		r.TPS, r.QPS, r.Errors = sysbenchFigures(string(outb))
		r.LagEnd, r.BehindEnd = lagEnd, behindEnd
		for _, s := range r.Series {
			if s.T <= end.Sub(start).Seconds() {
				r.LagMax = max(r.LagMax, s.Lag)
				r.BehindMax = max(r.BehindMax, s.Behind)
			}
		}
		r.Samples = len(r.Series)
		r.ChangesDuring = (c1 - c0) / end.Sub(start).Seconds()
		d, err := settle(2 * time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		r.CatchUpSeconds = d.Seconds()
		log.Printf("lag: %.0f tps, lag at end %.0f s (max %.0f s), behind at end %d (max %d), caught up %.2f s after",
			r.TPS, r.LagEnd, r.LagMax, r.BehindEnd, r.BehindMax, r.CatchUpSeconds)
		runs = append(runs, r)
	}
	data, _ := json.MarshalIndent(runs, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "lag.json"), data, 0o644); err != nil {
		log.Fatal(err)
	}
}

var (
	tpsRE = regexp.MustCompile(`transactions:\s+\d+\s+\(([\d.]+) per sec`)
	qpsRE = regexp.MustCompile(`queries:\s+\d+\s+\(([\d.]+) per sec`)
	errRE = regexp.MustCompile(`ignored errors:\s+(\d+)`)
)

func sysbenchFigures(s string) (tps, qps float64, errs int64) {
	if m := tpsRE.FindStringSubmatch(s); m != nil {
		tps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := qpsRE.FindStringSubmatch(s); m != nil {
		qps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := errRE.FindStringSubmatch(s); m != nil {
		errs, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return
}
