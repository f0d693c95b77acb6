#!/usr/bin/env bash
# bench/cutover.sh: the fleet-wide cutover's pause and the point selects' latency across it (issue 36), called by
# `make bench-cutover`.
#
# The driver is TestBenchCutover (cmd/proxy/fleet_cutover_bench_process_test.go), run only when
# SHARDGATE_BENCH_CUTOVER names the report's directory: it starts its own MariaDB servers (the cmd/proxy test
# package's two plus a third), a real etcd and the proxy binary as fleet processes, and for 1 proxy, 3 proxies, and 3
# proxies with one follower frozen (SIGSTOP) across the cutover, reshards a 20000-row table from 2 to 8 subtables
# over 3 nodes once per round under point selects and increments. It writes report.md (environment, one row per
# round, medians and ranges); the run's log goes to run.log beside it.
#
# Knobs: OUT (default bench/results/<date>-cutover), ROUNDS (5).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=${OUT:-bench/results/$(date +%Y-%m-%d-%H%M)-cutover}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
scripts/deps.sh mariadb etcd
SHARDGATE_BENCH_CUTOVER=$OUT ROUNDS=${ROUNDS:-5} go test ./cmd/proxy -run '^TestBenchCutover$' -count=1 -v -timeout 30m >"$OUT/run.log" 2>&1 ||
	{ tail -50 "$OUT/run.log" >&2; exit 1; }
echo "results in $OUT/report.md" >&2
