#!/usr/bin/env bash
# bench/deadlock.sh: issue 34's measurement. sysbench oltp_read_write through the sharded proxy
# (sbtest1 hash-sharded over 2 nodes x 2 subtables, etc/ks.yaml's rule) on servers of its own
# (PORTS, default 3327 3328, data in var/bench-deadlock), for each THREADS count, three paths:
#   detector   deadlock_detect_after default (100ms), innodb_lock_wait_timeout 50 s (server default)
#   off-50s    detector off (deadlock_detect_after: 0), 50 s
#   off-3s     detector off, innodb_lock_wait_timeout 3 s on both servers (the issue's workaround)
# One line per run: tps as sysbench reports it, the run's wall time, ignored errors, and for the
# detector path the deadlocks broken and their detection latency (median, max) from the proxy's log.
# Output in $OUT (default bench/results/deadlock-<time>). The servers are stopped at the end unless KEEP=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PORTS=${PORTS:-"3327 3328"}
export VARDIR=${VARDIR:-var/bench-deadlock}
THREADS=${THREADS:-"8 16"}
ROUNDS=${ROUNDS:-3} # paths run interleaved within each round, so drift on shared cores hits them alike
DURATION=${DURATION:-20}
TABLE_SIZE=${TABLE_SIZE:-10000}
PATHS_=${PATHS_:-"detector off-50s off-3s"}
OUT=${OUT:-bench/results/deadlock-$(date +%Y-%m-%d-%H%M)}
ADDR_PORT=${ADDR_PORT:-9736}
mkdir -p "$OUT"
read -r P1 P2 <<<"$PORTS"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

bench/cluster.sh start
trap '[[ ${KEEP:-0} == 1 ]] || bench/cluster.sh stop' EXIT
go build -o bin/proxy-deadlock ./cmd/proxy

config() { # $1: deadlock_detect_after
	sed -e "s/127.0.0.1:3307/127.0.0.1:$P1/; s/127.0.0.1:3308/127.0.0.1:$P2/" \
		-e "s/^addr: .*/addr: 127.0.0.1:$ADDR_PORT/; s/^web_addr: .*/web_addr: 127.0.0.1:$((ADDR_PORT + 1))/" \
		-e "s/^log_level: .*/log_level: info/" etc/ks.yaml >"$OUT/ks-$1.yaml"
	echo "deadlock_detect_after: $1" >>"$OUT/ks-$1.yaml"
}
timeout_all() { # $1: innodb_lock_wait_timeout on both servers
	for p in $P1 $P2; do mariadb -h127.0.0.1 -P"$p" -ushardgate -pshardgate -e "SET GLOBAL innodb_lock_wait_timeout = $1"; done
}
SB=(sysbench --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$ADDR_PORT" --mysql-user=shardgate
	--mysql-password=shardgate --mysql-db=sbtest --tables=1 --table-size="$TABLE_SIZE" --db-ps-mode=disable
	--mysql-ignore-errors=1213,1205,1180 --report-interval=0)

start_proxy() { # $1: deadlock_detect_after, $2: log file
	config "$1"
	bin/proxy-deadlock -config "$OUT/ks-$1.yaml" >"$2" 2>&1 &
	PROXY=$!
	for _ in $(seq 100); do mariadb -h127.0.0.1 -P"$ADDR_PORT" -ushardgate -pshardgate -e "SELECT 1" >/dev/null 2>&1 && return; sleep 0.1; done
	echo "proxy did not start" >&2; cat "$2" >&2; exit 1
}
stop_proxy() { kill "$PROXY"; wait "$PROXY" || true; }

for p in $P1 $P2; do mariadb -h127.0.0.1 -P"$p" -ushardgate -pshardgate -e "CREATE DATABASE IF NOT EXISTS sbtest"; done
start_proxy 100ms "$OUT/prepare.log"
"${SB[@]}" oltp_read_write cleanup >/dev/null 2>&1 || true
"${SB[@]}" oltp_read_write prepare >"$OUT/prepare.txt"
stop_proxy

echo "round,path,threads,tps,wall_s,ignored_errors,deadlocks_broken,latency_median_ms,latency_max_ms,waits_seen,graphs" >"$OUT/results.csv"
for round in $(seq "$ROUNDS"); do
for th in $THREADS; do
	for path in $PATHS_; do
		case $path in
		detector) after=100ms to=50 ;;
		off-50s) after=0 to=50 ;;
		off-3s) after=0 to=3 ;;
		esac
		timeout_all "$to"
		plog="$OUT/proxy-$path-$th-$round.log"
		start_proxy "$after" "$plog"
		log "$path, $th threads"
		t0=$(date +%s.%N)
		"${SB[@]}" --threads="$th" --time="$DURATION" oltp_read_write run >"$OUT/sysbench-$path-$th-$round.txt" 2>&1 || true
		wall=$(echo "$(date +%s.%N) - $t0" | bc)
		m=$(curl -s "http://127.0.0.1:$((ADDR_PORT + 1))/metrics" | grep '^shardgate_deadlock' || true)
		waits=$(awk '/^shardgate_deadlock_waits_total/ {print $2}' <<<"$m")
		graphs=$(awk '/^shardgate_deadlock_graphs_total/ {print $2}' <<<"$m")
		stop_proxy
		tps=$(grep -oP 'transactions:\s+\d+\s+\(\K[0-9.]+' "$OUT/sysbench-$path-$th-$round.txt" || echo 0)
		ign=$(grep -oP 'ignored errors:\s+\K\d+' "$OUT/sysbench-$path-$th-$round.txt" || echo 0)
		lat=$({ grep -oP '"after": "\K[^"]+' "$plog" || true; } | python3 -c '
import sys, re
def ms(s):
    m = re.fullmatch(r"([0-9.]+)(ns|µs|us|ms|s)", s.strip())
    return float(m.group(1)) * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1000}[m.group(2)] if m else 0
v = sorted(ms(l) for l in sys.stdin if l.strip())
print(f"{len(v)},{v[len(v)//2]:.0f},{v[-1]:.0f}" if v else "0,,")')
		echo "$round,$path,$th,$tps,$(printf %.1f "$wall"),$ign,$lat,${waits:-},${graphs:-}" | tee -a "$OUT/results.csv"
	done
done
done
timeout_all 50
