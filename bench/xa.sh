#!/usr/bin/env bash
# bench/xa.sh: the cost of transaction_mode: xa against multi, called by `make bench-xa` (and by `make bench`
# after bench/run.sh).
#
# Starts the cluster (bench/cluster.sh start; left running), builds bin/proxy once and starts it twice: "multi" with
# $MULTI_CONFIG (etc/ks.yaml: commit node after node, not atomic) and "xa" with $XA_CONFIG (etc/ks-xa.yaml: XA
# two-phase commit across nodes, the decision in the sidecar on node1; XA COMMIT ... ONE PHASE on one node). Both
# shard sbtest.sbtest1 by hash on id into SUBTABLES subtables, NODE1_SUBTABLES of them on node1. The table is loaded
# through the multi proxy when the backends do not hold exactly that layout (or PREPARE=1). Then, for each of
# THREADS, ROUNDS rounds of four interleaved runs of bench/xa.lua (one write transaction per event: BEGIN, two
# single-row UPDATEs, COMMIT): multi-two, xa-two, multi-one, xa-one ("two": the rows live on node1 and node2; "one":
# both on one node). Each run records sysbench's tps and latency, the proxy's and the mariadbd servers' CPU time
# (utime+stime from /proc/PID/stat) and, on the xa proxy, the deltas of shardgate_xa_commits_total{phases} (so the
# report shows that "two" really committed in two phases and "one" in one). Writes $OUT/results.csv, $OUT/env.txt,
# $OUT/report.md and $OUT/raw/. The proxies are stopped at exit; the MariaDB servers are not.
#
# Environment (defaults): OUT (bench/results/<date>-xa), ROUNDS (3), DURATION (15 s per run), THREADS ("1 16"),
# MODE (disable: --db-ps-mode, text protocol; auto: binary prepared statements), TABLE_SIZE (10000), WARMUP (3 s per
# proxy, not recorded; 0 skips), PREPARE (auto: load only when the layout check fails; 1: always; 0: never),
# MULTI_CONFIG (etc/ks.yaml), XA_CONFIG (etc/ks-xa.yaml), SUBTABLES (4), NODE1_SUBTABLES (2), PORTS ("3307 3308":
# node1 node2), CLUSTER (1; 0: do not call bench/cluster.sh), LOG_LEVEL (warn), STRICT (0; 1: exit 1 when a run
# failed or had errors), PROXY_REV (empty: bin/proxy built from the working tree; a commit such as HEAD: the proxy
# built from `git archive` of that commit in a temporary directory, so uncommitted changes stay out of it). With the
# defaults: 24 runs of 15 s, about 6.5 minutes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
START=$(date +%s)

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15}
THREADS=${THREADS:-"1 16"}
MODE=${MODE:-disable}
TABLE_SIZE=${TABLE_SIZE:-10000}
WARMUP=${WARMUP:-3}
PREPARE=${PREPARE:-auto}
MULTI_CONFIG=${MULTI_CONFIG:-etc/ks.yaml}
XA_CONFIG=${XA_CONFIG:-etc/ks-xa.yaml}
SUBTABLES=${SUBTABLES:-4}
NODE1_SUBTABLES=${NODE1_SUBTABLES:-2}
export PORTS=${PORTS:-"3307 3308"}
CLUSTER=${CLUSTER:-1}
LOG_LEVEL=${LOG_LEVEL:-warn}
STRICT=${STRICT:-0}
PROXY_REV=${PROXY_REV:-}
if [[ -z ${OUT:-} ]]; then
	OUT=bench/results/$(date +%Y-%m-%d)-xa
	[[ ! -e $OUT ]] || OUT=bench/results/$(date +%Y-%m-%d-%H%M)-xa # A second run the same day.
fi
read -r PORT1 PORT2 _ <<<"$PORTS"
DB_HOST=127.0.0.1 # Never localhost: that is the unix socket.
DB_USER=shardgate
DB_PASS=shardgate
DB_NAME=sbtest
CLK_TCK=$(getconf CLK_TCK)
CASES="multi-two xa-two multi-one xa-one" # One round, in this order.

die() { echo "xa.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

for v in ROUNDS DURATION TABLE_SIZE WARMUP SUBTABLES NODE1_SUBTABLES; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, got '${!v}'"
done
((ROUNDS >= 1 && DURATION >= 1)) || die "ROUNDS and DURATION must be at least 1"
((NODE1_SUBTABLES >= 1 && NODE1_SUBTABLES < SUBTABLES)) || die "NODE1_SUBTABLES must be from 1 to SUBTABLES-1"
for t in $THREADS; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "THREADS must be positive integers, got '$t'"; done
[[ $MODE == disable || $MODE == auto ]] || die "MODE must be disable or auto, got '$MODE'"
[[ $PREPARE == auto || $PREPARE == [01] ]] || die "PREPARE must be auto, 0 or 1, got '$PREPARE'"
[[ -n ${PORT2:-} ]] || die "PORTS needs two ports (node1 node2), got '$PORTS'"
[[ -f $MULTI_CONFIG ]] || die "MULTI_CONFIG $MULTI_CONFIG not found"
[[ -f $XA_CONFIG ]] || die "XA_CONFIG $XA_CONFIG not found"
command -v sysbench >/dev/null || die "sysbench not found (apt-get install -y sysbench)"
command -v mariadb >/dev/null || die "the mariadb client not found (apt-get install -y mariadb-client)"
command -v go >/dev/null || die "go not found"
command -v curl >/dev/null || die "curl not found"

mkdir -p "$OUT/raw" bin
OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.csv
ENVFILE=$OUT/env.txt
log "results go to $OUT"

# Processes we start; only these are stopped at exit, by pid.
BG_PIDS=()
TMP=$(mktemp -d)
cleanup() {
	local pid i
	rm -f "$OUT/.times" "$OUT/.cl0" "$OUT/.cl1"
	for pid in "${BG_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${BG_PIDS[@]}"; do
		for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
# cfg_get FILE KEY: value of a top-level "key: value" in a YAML file.
cfg_get() { sed -nE "s/^$2[[:space:]]*:[[:space:]]*['\"]?([^'\" #]*).*/\1/p" "$1" | head -n1; }
connect_host() { case $1 in "" | 0.0.0.0 | "[::]" | "::") echo 127.0.0.1 ;; *) echo "$1" ;; esac; }
# cpu_ticks PID...: utime+stime summed over the pids, empty if none is readable.
cpu_ticks() {
	local pid sum="" t
	for pid in "$@"; do
		[[ -r /proc/$pid/stat ]] || continue
		t=$(sed -E 's/^.*\) //' "/proc/$pid/stat" | awk '{print $12 + $13}') || continue # comm may hold spaces.
		sum=$((${sum:-0} + t))
	done
	echo "$sum"
}
cpu_seconds() { # BEFORE AFTER
	[[ -n $1 && -n $2 ]] || { echo ""; return; }
	awk -v a="$1" -v b="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz }'
}
# host_ticks: busy CPU ticks of the whole machine (user nice system irq softirq steal, all cores) from /proc/stat.
host_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
# children_cpu: user+system seconds of this shell's waited-for children so far (bash's times, second line), so the
# difference across a run is sysbench's own CPU (timeout waits for it, we wait for timeout). Runs in this shell: a
# $(...) subshell would report its own children only.
children_cpu() {
	times >"$OUT/.times"
	tail -n1 "$OUT/.times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub(/s$/, "", a[2]); t += a[1] * 60 + a[2] } printf "%.2f\n", t }'
}
# xa_commits WEBADDR: "one two" from shardgate_xa_commits_total{phases=...} on the admin listener's /metrics.
xa_commits() {
	curl -fsS --max-time 3 "http://$1/metrics" 2>/dev/null |
		awk '/^shardgate_xa_commits_total\{phases="one"\}/ {o = $2} /^shardgate_xa_commits_total\{phases="two"\}/ {t = $2}
			END {if (o != "" || t != "") printf "%d %d\n", o, t}' || true
}
csv_safe() { tr '\n,"' ' ;'"'" | cut -c1-160 | sed -E 's/[[:space:]]+$//'; }

load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
	log "WARNING: load average is $load1 before starting; results will be noisy (see 'top')"
fi

# ---------------------------------------------------------------------------
# Cluster (left running: it may have been running before, and other benchmarks use it).
if [[ $CLUSTER == 1 ]]; then
	log "starting the MariaDB cluster (bench/cluster.sh start, PORTS=$PORTS)"
	bench/cluster.sh start >&2 || die "bench/cluster.sh start failed"
fi
node_q() { mariadb --no-defaults -h"$DB_HOST" -P"$1" -u"$DB_USER" -p"$DB_PASS" -N -B -e "$2"; }
for p in $PORT1 $PORT2; do
	node_q "$p" "SELECT 1" >/dev/null 2>&1 || die "cannot run SELECT 1 as $DB_USER on $DB_HOST:$p; is the cluster up?"
done
DB_PIDS=()
for p in $PORT1 $PORT2; do
	for pid in $(ss -Hltnp "sport = :$p" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do DB_PIDS+=("$pid"); done
done
[[ ${#DB_PIDS[@]} -gt 0 ]] || log "WARNING: cannot find the mariadbd pids on ports $PORTS; DB CPU will be blank"

# ---------------------------------------------------------------------------
# One binary, two proxies.
declare -A CFG HOST PORT WEB PID
CFG[multi]=$MULTI_CONFIG CFG[xa]=$XA_CONFIG
for p in multi xa; do
	a=$(cfg_get "${CFG[$p]}" addr)
	a=${a:-127.0.0.1:9696}
	w=$(cfg_get "${CFG[$p]}" web_addr)
	HOST[$p]=$(connect_host "${a%:*}") PORT[$p]=${a##*:}
	WEB[$p]=""
	[[ -z $w ]] || WEB[$p]=$(connect_host "${w%:*}"):${w##*:}
	for k in addr web_addr prometheus_addr; do
		v=$(cfg_get "${CFG[$p]}" $k)
		[[ -z $v ]] || ! port_in_use "${v##*:}" || die "$p: $k ${v} of ${CFG[$p]} is already in use (another proxy running?)"
	done
done
[[ ${PORT[multi]} != "${PORT[xa]}" ]] || die "$MULTI_CONFIG and $XA_CONFIG use the same addr; give each its own"
[[ -n ${WEB[xa]} ]] || die "$XA_CONFIG has no web_addr: the XA commit counters are read from its /metrics"

if [[ -n $PROXY_REV ]]; then
	rev=$(git rev-parse --short=12 --verify -q "$PROXY_REV^{commit}") || die "PROXY_REV=$PROXY_REV is not a commit"
	log "building the proxy from git archive of $rev"
	mkdir "$TMP/src"
	git archive "$rev" | tar -x -C "$TMP/src"
	(cd "$TMP/src" && go build -o "$TMP/proxy" ./cmd/proxy) >"$OUT/build.log" 2>&1 ||
		die "the proxy of $rev does not build, see $OUT/build.log"
	PROXY_BIN=$TMP/proxy
	PROXY_SOURCE="commit $rev, built from git archive (uncommitted changes left out)"
else
	log "building bin/proxy from the working tree"
	go build -o bin/proxy ./cmd/proxy >"$OUT/build.log" 2>&1 || die "the proxy does not build, see $OUT/build.log"
	PROXY_BIN=bin/proxy
	PROXY_SOURCE="the working tree at $(git rev-parse --short=12 --verify -q HEAD 2>/dev/null || echo '(no commit)')$([[ -n $(git status --porcelain -- '*.go' go.mod go.sum 2>/dev/null | head -n1) ]] && echo ', with uncommitted changes to Go files')"
fi
go build -o bin/bench-report ./bench/report >>"$OUT/build.log" 2>&1 || die "bench/report does not build, see $OUT/build.log"
PROXY_SHA=$(sha256sum "$PROXY_BIN" | cut -c1-12)

start_proxy() { # NAME
	local name=$1 pid i
	"$PROXY_BIN" -config "${CFG[$name]}" -log-level "$LOG_LEVEL" >"$OUT/$name.log" 2>&1 &
	pid=$!
	BG_PIDS+=("$pid")
	for ((i = 0; i < 150; i++)); do
		kill -0 "$pid" 2>/dev/null || die "$name proxy (${CFG[$name]}) exited at start-up: $(tail -n3 "$OUT/$name.log")"
		if port_in_use "${PORT[$name]}" &&
			mariadb --no-defaults -h"${HOST[$name]}" -P"${PORT[$name]}" -u"$DB_USER" -p"$DB_PASS" -e "SELECT 1" >/dev/null 2>&1; then
			PID[$name]=$pid
			log "$name proxy is up (pid $pid, ${HOST[$name]}:${PORT[$name]}, ${CFG[$name]})"
			return
		fi
		sleep 0.1
	done
	die "$name proxy did not answer on port ${PORT[$name]} within 15 s, see $OUT/$name.log"
}
start_proxy multi
start_proxy xa

# ---------------------------------------------------------------------------
# Data: sbtest1_0000..(SUBTABLES-1), subtable s on node1 when s < NODE1_SUBTABLES, else on node2, holding exactly
# the ids with id % SUBTABLES = s, TABLE_SIZE rows in all. bench/xa.lua picks its ids by this rule; checking it on
# the backends directly (not through a proxy) is what makes "two" and "one" mean what they say.
layout_ok() {
	local s port name got total=0
	for ((s = 0; s < SUBTABLES; s++)); do
		port=$PORT2
		((s < NODE1_SUBTABLES)) && port=$PORT1
		name=$(printf 'sbtest1_%04d' "$s")
		got=$(node_q "$port" "SELECT COUNT(*), COALESCE(SUM(id % $SUBTABLES <> $s), 0) FROM $DB_NAME.$name" 2>/dev/null) || {
			LAYOUT_WHY="$DB_NAME.$name missing on port $port"
			return 1
		}
		read -r n bad <<<"$got"
		((bad == 0)) || { LAYOUT_WHY="$DB_NAME.$name on port $port holds $bad rows with id % $SUBTABLES <> $s"; return 1; }
		total=$((total + n))
	done
	((total == TABLE_SIZE)) || { LAYOUT_WHY="the subtables hold $total rows, not TABLE_SIZE=$TABLE_SIZE"; return 1; }
	LAYOUT_NOTE="sbtest1_0000..$(printf %04d $((SUBTABLES - 1))): $NODE1_SUBTABLES on node1 ($DB_HOST:$PORT1), $((SUBTABLES - NODE1_SUBTABLES)) on node2 ($DB_HOST:$PORT2), $total rows, every row in subtable id % $SUBTABLES (checked on the backends)"
}
LAYOUT_WHY="" LAYOUT_NOTE=""
if [[ $PREPARE == 1 ]] || { [[ $PREPARE == auto ]] && ! layout_ok; }; then
	[[ $PREPARE == 1 ]] || log "sharded data not as expected ($LAYOUT_WHY); loading it"
	log "loading $DB_NAME.sbtest1 ($TABLE_SIZE rows) through the multi proxy"
	SB_PREP=(--db-driver=mysql --mysql-host="${HOST[multi]}" --mysql-port="${PORT[multi]}" --mysql-user="$DB_USER"
		--mysql-password="$DB_PASS" --mysql-db="$DB_NAME" --tables=1 --table-size="$TABLE_SIZE" --auto-inc=off)
	{ sysbench oltp_read_write "${SB_PREP[@]}" cleanup && sysbench oltp_read_write "${SB_PREP[@]}" prepare; } \
		>"$OUT/prepare.log" 2>&1 || die "sysbench prepare through the multi proxy failed, see $OUT/prepare.log"
	DATA_NOTE="loaded for this run"
else
	DATA_NOTE="kept from an earlier run"
fi
layout_ok || die "sharded data not as bench/xa.lua expects: $LAYOUT_WHY (PREPARE=1 reloads it; SUBTABLES, NODE1_SUBTABLES describe the rule)"
log "data: $LAYOUT_NOTE"

# ---------------------------------------------------------------------------
{
	echo "date=$(date '+%Y-%m-%d %H:%M %Z')"
	echo "proxy=$PROXY_SOURCE; sha256 $PROXY_SHA; one binary for both proxies, -log-level $LOG_LEVEL"
	echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) x $(grep -c '^processor' /proc/cpuinfo)"
	echo "kernel=$(uname -r)"
	echo "go=$(go version | sed 's/^go version //')"
	echo "mariadbd=$(mariadbd --version 2>/dev/null | sed -E 's/^.*Ver //' || echo unknown)"
	echo "mariadb settings=$(node_q "$PORT1" "SELECT CONCAT('innodb_flush_log_at_trx_commit=', @@innodb_flush_log_at_trx_commit, ' sync_binlog=', @@sync_binlog, ' log_bin=', @@log_bin, ' binlog_format=', @@binlog_format, ' innodb_buffer_pool_size=', @@innodb_buffer_pool_size DIV 1048576, 'M')" 2>/dev/null || echo unknown)"
	echo "mariadbd processes running=$(ps -C mariadbd -o args= 2>/dev/null | grep -o -- '--port=[0-9]*' | cut -d= -f2 | paste -sd' ' -) (DB CPU counts ports $PORT1 $PORT2 only)"
	echo "sysbench=$(sysbench --version)"
	echo "GOMAXPROCS=${GOMAXPROCS:-unset (Go default; nproc=$(nproc))}"
	echo "multi=$MULTI_CONFIG on ${HOST[multi]}:${PORT[multi]}, transaction_mode $(cfg_get "$MULTI_CONFIG" transaction_mode | grep . || echo 'not set (multi)')"
	echo "xa=$XA_CONFIG on ${HOST[xa]}:${PORT[xa]}, transaction_mode $(cfg_get "$XA_CONFIG" transaction_mode | grep . || echo 'not set (multi)')"
	echo "data=$LAYOUT_NOTE; $DATA_NOTE"
	echo "workload=bench/xa.lua: BEGIN; UPDATE sbtest1 SET k=k+1 WHERE id=?; UPDATE ... WHERE id=?; COMMIT; ids uniform over 1..$TABLE_SIZE; two: one row on node1, one on node2; one: both on node1 or both on node2 (random per event)"
	echo "mode=--db-ps-mode=$MODE"
	echo "threads=$THREADS"
	echo "rounds=$ROUNDS"
	echo "duration_s=$DURATION"
	echo "warmup_s=$WARMUP"
	echo "load average at start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$ENVFILE"

# run_xa PROXY NODES THREADS DURATION OUTFILE: sysbench's exit code.
run_xa() {
	timeout --foreground --signal=INT --kill-after=10 $(($4 + 60)) \
		sysbench bench/xa.lua --db-driver=mysql --mysql-host="${HOST[$1]}" --mysql-port="${PORT[$1]}" \
		--mysql-user="$DB_USER" --mysql-password="$DB_PASS" --mysql-db="$DB_NAME" --table-size="$TABLE_SIZE" \
		--xa-nodes="$2" --xa-subtables="$SUBTABLES" --xa-node1-subtables="$NODE1_SUBTABLES" \
		--time="$4" --threads="$3" --db-ps-mode="$MODE" --report-interval=0 --percentile=95 --histogram=on run >"$5" 2>&1
}

if ((WARMUP > 0)); then
	wthreads=$(tr ' ' '\n' <<<"$THREADS" | sort -n | tail -n1)
	for p in multi xa; do
		log "warm-up: $p, two nodes, $wthreads threads, ${WARMUP}s (not recorded)"
		run_xa "$p" two "$wthreads" "$WARMUP" "$OUT/raw/warmup-$p.txt" || log "warm-up on $p failed, see raw/warmup-$p.txt"
	done
fi

echo "ts,threads,round,proxy,nodes,status,duration_s,$(bin/bench-report -parse-header),transactions,proxy_cpu_s,db_cpu_s,client_cpu_s,host_cpu_s,wall_s,xa_one_phase,xa_two_phase,raw" >"$RESULTS"
EMPTY=$(bin/bench-report -parse-header | sed 's/[^,]//g')
n_threads=$(wc -w <<<"$THREADS")
total=$((n_threads * ROUNDS * 4))
log "$total runs of ${DURATION}s: about $(((total * (DURATION + 1) + 59) / 60)) minutes"
i=0 failed=0 errored=0
for threads in $THREADS; do
	for ((round = 1; round <= ROUNDS; round++)); do
		for c in $CASES; do
			i=$((i + 1))
			proxy=${c%-*} nodes=${c#*-}
			pid=${PID[$proxy]}
			raw=raw/$c-t$threads-r$round.txt
			status=ok fragment=$EMPTY txns="" cpu="" dbcpu="" clcpu="" hostcpu="" wall="" one="" two=""
			if ! kill -0 "$pid" 2>/dev/null; then
				status="unavailable: the $proxy proxy is no longer running (see $proxy.log)"
				echo "$status" >"$OUT/$raw"
			else
				read -r o0 t0 <<<"$(xa_commits "${WEB[$proxy]}")" || true
				c0=$(cpu_ticks "$pid")
				d0=$(cpu_ticks "${DB_PIDS[@]}")
				h0=$(host_ticks)
				children_cpu >"$OUT/.cl0"
				w0=$EPOCHREALTIME
				rc=0
				run_xa "$proxy" "$nodes" "$threads" "$DURATION" "$OUT/$raw" || rc=$?
				w1=$EPOCHREALTIME
				children_cpu >"$OUT/.cl1"
				h1=$(host_ticks)
				wall=$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.2f", b - a }')
				d1=$(cpu_ticks "${DB_PIDS[@]}")
				c1=$(cpu_ticks "$pid")
				clcpu=$(awk -v a="$(cat "$OUT/.cl0")" -v b="$(cat "$OUT/.cl1")" 'BEGIN { printf "%.2f", b - a }')
				hostcpu=$(cpu_seconds "$h0" "$h1")
				read -r o1 t1 <<<"$(xa_commits "${WEB[$proxy]}")" || true
				cpu=$(cpu_seconds "$c0" "$c1")
				dbcpu=$(cpu_seconds "$d0" "$d1")
				if [[ -n ${o0:-} && -n ${o1:-} ]]; then one=$((o1 - o0)) two=$((t1 - t0)); fi
				txns=$(sed -nE 's/^[[:space:]]*transactions:[[:space:]]+([0-9]+).*/\1/p' "$OUT/$raw" | head -n1)
				if ((rc != 0)); then
					why=$(grep -E '^(FATAL|ALERT)' "$OUT/$raw" | head -n2 | tr '\n' ' ' || true)
					[[ -n $why ]] || why=$(tail -n1 "$OUT/$raw")
					kill -0 "$pid" 2>/dev/null || why="the $proxy proxy died (see $proxy.log); $why"
					status="sysbench exit $rc: $why"
				elif ! fragment=$(bin/bench-report -parse "$OUT/$raw" 2>&1); then
					status="unparsable output: $fragment"
					fragment=$EMPTY
				fi
			fi
			status=$(printf '%s' "$status" | csv_safe)
			echo "$(date +%s),$threads,$round,$proxy,$nodes,$status,$DURATION,$fragment,$txns,$cpu,$dbcpu,$clcpu,$hostcpu,$wall,$one,$two,$raw" >>"$RESULTS"
			if [[ $status == ok ]]; then
				IFS=, read -r _ _ tps _ _ p95 _ errs reconn <<<"$fragment"
				note=""
				if [[ $errs != 0 || $reconn != 0 ]]; then
					note="  <-- $errs errors, $reconn reconnects"
					errored=$((errored + 1))
				fi
				log "[$i/$total] t=$threads r=$round $c: $tps tps, p95 ${p95}ms, proxy cpu ${cpu}s${one:+, xa commits one/two +$one/+$two}$note"
			else
				failed=$((failed + 1))
				log "[$i/$total] t=$threads r=$round $c: FAILED: $status"
			fi
		done
	done
done
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$ENVFILE"
echo "xa proxy after the runs=$(curl -fsS --max-time 3 "http://${WEB[xa]}/metrics" 2>/dev/null | grep -E '^shardgate_xa_(decisions_refused_total|recovered_branches_total|in_flight|left_to_recovery)' | tr '\n' ' ' | sed -E 's/ +$//')" >>"$ENVFILE"
echo "proxy log lines at warn or above=multi $(grep -cE 'WARN|ERROR|FATAL|panic' "$OUT/multi.log" || true), xa $(grep -cE 'WARN|ERROR|FATAL|panic' "$OUT/xa.log" || true)" >>"$ENVFILE"
echo "wall time=$(($(date +%s) - START)) s" >>"$ENVFILE"

# ---------------------------------------------------------------------------
# Report: per threads and nodes, medians over rounds; the ratio xa/multi is the median of the per-round ratios.
awk -F, -v threads="$THREADS" -v envfile="$ENVFILE" -v cores="$(nproc)" '
function med(list,    a, n, i, j, t) {
	n = split(list, a, " ")
	if (n == 0) return ""
	for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] + 0 : (a[n / 2] + a[n / 2 + 1]) / 2
}
function lo(list,    a, n, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
function hi(list,    a, n, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
function add(arr, k, v) { arr[k] = (k in arr) ? arr[k] " " v : v }
function f(x, fmt) { return x == "" ? "–" : sprintf(fmt, x) }
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
{
	k = $col["threads"] SUBSEP $col["nodes"] SUBSEP $col["proxy"]
	runs[k]++
	if ($col["status"] != "ok") { failed[k]++; next }
	errs[k] += $col["errors"] + $col["reconnects"]
	tps[$col["threads"], $col["nodes"], $col["proxy"], $col["round"]] = $col["tps"]
	add(TPS, k, $col["tps"]); add(P95, k, $col["p95_ms"])
	n = $col["transactions"] + 0
	if (n > 0 && $col["proxy_cpu_s"] != "") add(CPU, k, $col["proxy_cpu_s"] * 1e6 / n)
	if (n > 0 && $col["db_cpu_s"] != "") add(DB, k, $col["db_cpu_s"] * 1e6 / n)
	if ($col["proxy_cpu_s"] != "") add(PS, k, $col["proxy_cpu_s"])
	if ($col["db_cpu_s"] != "") add(DS, k, $col["db_cpu_s"])
	if ($col["client_cpu_s"] != "") add(CS, k, $col["client_cpu_s"])
	if ($col["host_cpu_s"] != "") {
		add(HS, k, $col["host_cpu_s"])
		if ($col["wall_s"] > 0) add(BUSY, k, 100 * $col["host_cpu_s"] / (cores * $col["wall_s"]))
		if ($col["proxy_cpu_s"] != "" && $col["db_cpu_s"] != "" && $col["client_cpu_s"] != "")
			add(REST, k, $col["host_cpu_s"] - $col["proxy_cpu_s"] - $col["db_cpu_s"] - $col["client_cpu_s"])
	}
	if ($col["xa_two_phase"] != "") { two[k] += $col["xa_two_phase"]; one[k] += $col["xa_one_phase"]; txn[k] += n }
	if ($col["round"] + 0 > rounds) rounds = $col["round"] + 0
	dur = $col["duration_s"]
}
END {
	while ((getline line < envfile) > 0) env = env "    " line "\n"
	print "# transaction_mode: xa against multi (bench/xa.sh)\n"
	print "One write transaction per sysbench event (bench/xa.lua): `BEGIN; UPDATE sbtest1 SET k=k+1 WHERE id=?;` twice, `COMMIT`."
	print "`two`: the two rows live on node1 and node2 (xa: XA PREPARE on both, the decision written to the sidecar on node1,"
	print "XA COMMIT on both; multi: COMMIT on node1, then on node2). `one`: both rows on the same node (xa: XA COMMIT ... ONE"
	print "PHASE; multi: COMMIT). Runs interleaved multi-two, xa-two, multi-one, xa-one in every round.\n"
	print "| threads | nodes | multi tps | xa tps | xa/multi | min–max | multi p95 ms | xa p95 ms | multi proxy CPU µs/txn | xa proxy CPU µs/txn | multi DB CPU µs/txn | xa DB CPU µs/txn | xa commits in 2 phases | errors |"
	print "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	nt = split(threads, T, " ")
	split("two one", N, " ")
	for (ti = 1; ti <= nt; ti++) for (ni = 1; ni <= 2; ni++) {
		t = T[ti]; nn = N[ni]; km = t SUBSEP nn SUBSEP "multi"; kx = t SUBSEP nn SUBSEP "xa"
		ratios = ""
		for (r = 1; r <= rounds; r++) {
			a = tps[t, nn, "multi", r]; b = tps[t, nn, "xa", r]
			if (a != "" && b != "" && a + 0 > 0) ratios = ratios (ratios == "" ? "" : " ") b / a
		}
		share = ""
		if (txn[kx] > 0) share = sprintf("%.2f (%d of %d)", two[kx] / (one[kx] + two[kx] > 0 ? one[kx] + two[kx] : 1), two[kx], one[kx] + two[kx])
		e = errs[km] + errs[kx]; fl = failed[km] + failed[kx]
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, nn,
			f(med(TPS[km]), "%.0f"), f(med(TPS[kx]), "%.0f"),
			ratios == "" ? "–" : "**" sprintf("%.2f", med(ratios)) "**",
			ratios == "" ? "–" : sprintf("%.2f–%.2f", lo(ratios), hi(ratios)),
			f(med(P95[km]), "%.3f"), f(med(P95[kx]), "%.3f"),
			f(med(CPU[km]), "%.0f"), f(med(CPU[kx]), "%.0f"),
			f(med(DB[km]), "%.0f"), f(med(DB[kx]), "%.0f"),
			share == "" ? "–" : share,
			(e > 0 || fl > 0) ? "**" e (fl > 0 ? ", " fl " failed runs" : "") " ⚠**" : "0"
	}
	print ""
	print "- `multi tps`, `xa tps`: sysbench transactions per second, median over " rounds " rounds. `xa/multi`: the median of the"
	print "  per-round ratios xa tps / multi tps (same threads, nodes and round); `min–max`: their smallest and largest."
	print "- `p95 ms`: 95th percentile latency of a transaction, from the histogram, median over rounds."
	print "- `proxy CPU µs/txn`: utime+stime of the proxy process over the run (/proc/PID/stat, 10 ms ticks) x 10^6 /"
	print "  transactions, median over rounds; `DB CPU µs/txn`: the same for the two mariadbd servers together."
	print "- `xa commits in 2 phases`: on the xa proxy, the share of the commits counted by shardgate_xa_commits_total"
	print "  (phases two vs one) during the runs: 1.00 for `two`, 0.00 for `one` shows the ids landed where meant."
	print "- `errors`: sysbench ignored errors + reconnects summed over both proxies and all rounds, and failed runs; must be 0.\n"
	print "Where the CPU went, seconds per run (median over rounds; each run lasts a little longer than its " dur " s: connect, warm-up of the"
	print "threads, disconnect; the machine has " cores " cores):\n"
	print "| threads | nodes | proxy | proxy s | MariaDB node1+node2 s | sysbench s | rest of the machine s | machine busy % |"
	print "|---:|---|---|---:|---:|---:|---:|---:|"
	for (ti = 1; ti <= nt; ti++) for (ni = 1; ni <= 2; ni++) for (pi = 1; pi <= 2; pi++) {
		k = T[ti] SUBSEP N[ni] SUBSEP (pi == 1 ? "multi" : "xa")
		printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", T[ti], N[ni], pi == 1 ? "multi" : "xa",
			f(med(PS[k]), "%.2f"), f(med(DS[k]), "%.2f"), f(med(CS[k]), "%.2f"), f(med(REST[k]), "%.2f"), f(med(BUSY[k]), "%.0f")
	}
	print ""
	print "- `rest of the machine`: busy time of all cores (/proc/stat) less the three columns before it: the idle proxy of"
	print "  the other mode, other servers (replicas, other tests), the kernel outside these processes, this script."
	print "- `machine busy %`: busy time of all cores / (cores x the wall time of the run).\n"
	print "Environment:\n"
	printf "%s", env
}' "$RESULTS" >"$OUT/report.md"

log "report: $OUT/report.md ($failed failed runs, $errored runs with errors; $(($(date +%s) - START)) s)"
if [[ $STRICT == 1 && $((failed + errored)) -gt 0 ]]; then
	exit 1
fi
