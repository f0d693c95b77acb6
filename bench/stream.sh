#!/usr/bin/env bash
# bench/stream.sh: the change-stream funnel benchmark, called by `make bench-stream`.
#
# Starts the local cluster (bench/cluster.sh: binary logs with ROW, FULL row image and FULL row metadata), a
# sharded proxy (etc/ks.yaml: sbtest.sbtest1 in 2+2 subtables), loads sbtest1 through it, and runs bench/stream,
# which writes the two workloads and measures each stage (see bench/stream/main.go). The report goes to
# $OUT/report.md (default bench/results/<date>-stream).
#
# Environment: OUT, ROWS (batched workload rows, 100000), OLTP_SECONDS (10), THREADS (16).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d-%H%M)-stream}
ROWS=${ROWS:-100000}
OLTP_SECONDS=${OLTP_SECONDS:-10}
THREADS=${THREADS:-16}
CONFIG=etc/ks.yaml
mkdir -p "$OUT" bin

command -v sysbench >/dev/null || { echo "stream.sh: sysbench not found (apt-get install -y sysbench)" >&2; exit 1; }
command -v mariadb-binlog >/dev/null || { echo "stream.sh: mariadb-binlog not found (apt-get install -y mariadb-client)" >&2; exit 1; }

bench/cluster.sh start >&2
# Servers started before row metadata was on keep their setting until a restart: set it for this run.
for port in 3307 3308; do
	mariadb --no-defaults -h127.0.0.1 -P"$port" -ushardgate -pshardgate -e "SET GLOBAL binlog_row_metadata = 'FULL'"
done
go build -o bin/proxy ./cmd/proxy
go build -o bin/stream ./bench/stream

bin/proxy -config "$CONFIG" -log-level warn >"$OUT/proxy.log" 2>&1 &
PROXY=$!
trap 'kill $PROXY 2>/dev/null || true; wait $PROXY 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	mariadb --no-defaults -h127.0.0.1 -P9696 -ushardgate -pshardgate -e "SELECT 1" >/dev/null 2>&1 && break
	sleep 0.1
done

SB=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=9696 --mysql-user=shardgate --mysql-password=shardgate
	--mysql-db=sbtest --tables=1 --table-size=10000 --auto-inc=off)
{ sysbench oltp_write_only "${SB[@]}" cleanup && sysbench oltp_write_only "${SB[@]}" prepare; } >"$OUT/prepare.log" 2>&1 ||
	{ echo "stream.sh: sysbench prepare failed, see $OUT/prepare.log" >&2; exit 1; }

bin/stream -config "$CONFIG" -out "$OUT" -rows "$ROWS" -oltp-seconds "$OLTP_SECONDS" -threads "$THREADS"
