// Command report turns the raw results of bench/run.sh into a Markdown report
// and an SVG chart.
//
//	report -in OUT/results.csv -out OUT [-env OUT/env.txt]
//
// writes OUT/report.md and OUT/qps.svg. results.csv has one line per sysbench
// run (see csvHeader); every cell of the report is the median over rounds,
// and ratios are taken between medians of the same test, mode and threads.
// env.txt holds key=value lines describing the machine and the proxy
// settings; they become the environment block at the top of the report.
//
//	report -parse FILE
//
// reads one sysbench output and prints the CSV fragment
// "queries,qps,tps,avg_ms,p50_ms,p95_ms,max_ms,errors,reconnects" that run.sh
// splices into results.csv. It exits 1 when the output has no statistics
// (sysbench failed).
//
// The program has no dependencies beyond the standard library.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	in := flag.String("in", "", "results.csv written by bench/run.sh")
	out := flag.String("out", "", "directory for report.md and qps.svg (default: the directory of -in)")
	envPath := flag.String("env", "", "key=value environment file (default: env.txt next to -in, if present)")
	parse := flag.String("parse", "", "parse one sysbench output file and print its CSV fragment")
	parseHdr := flag.Bool("parse-header", false, "print the header of the -parse fragment and exit")
	flag.Parse()

	if *parseHdr {
		fmt.Println(parseHeader)
		return
	}
	if *parse != "" {
		f, err := os.Open(*parse)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		if err := parseFile(os.Stdout, f, *parse); err != nil {
			fatal(err)
		}
		return
	}
	if *in == "" {
		flag.Usage()
		os.Exit(2)
	}
	if *out == "" {
		*out = filepath.Dir(*in)
	}
	if err := run(*in, *out, *envPath); err != nil {
		fatal(err)
	}
}

func run(in, out, envPath string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	recs, err := readResults(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}

	var env []EnvVar
	if envPath == "" {
		if p := filepath.Join(filepath.Dir(in), "env.txt"); fileExists(p) {
			envPath = p
		}
	}
	if envPath != "" {
		ef, err := os.Open(envPath)
		if err != nil {
			return err
		}
		env, err = readEnv(ef)
		ef.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", envPath, err)
		}
	}

	rp := newReport(recs, env)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if len(recs) > 0 {
		var svg bytes.Buffer
		if err := rp.writeSVG(&svg); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "qps.svg"), svg.Bytes(), 0o644); err != nil {
			return err
		}
		rp.Chart = "qps.svg"
	}
	var md bytes.Buffer
	if err := rp.writeMarkdown(&md); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "report.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "report: wrote %s\n", filepath.Join(out, "report.md"))
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}
