#!/usr/bin/env bash
# bench/cache.sh: the result cache (issue 39) against direct MariaDB, called by `make bench-cache`.
#
# Paths, run interleaved in each round (direct relay proxy cache qcache, direct relay ...):
#   direct  sysbench -> MariaDB node1 (127.0.0.1:3307), table sbtest.sbtest1
#   relay   sysbench -> bin/relay (127.0.0.1:9695) -> node1
#   proxy   sysbench -> bin/proxy -config etc/ks.yaml (sbtest1 hash-sharded into 2+2 subtables), no cache
#   cache   sysbench -> bin/proxy -config $CACHE_CONFIG (etc/ks-cache.yaml: the same rule plus cache: on sbtest.sbtest1)
#   qcache  sysbench -> node1 directly with MariaDB's own query cache on: SET GLOBAL query_cache_size=$QC_SIZE,
#           query_cache_type=ON just before each qcache run, and back to the values found just after it
# Workloads (WORKLOADS):
#   point   sysbench oltp_point_select, TABLE_SIZE rows
#   mixed   bench/cache.lua: each statement an UPDATE of k by id with probability UPDATE_PCT %, else the point select
#   big     oltp_point_select on BIG_ROWS rows (reloaded), the cache's memory at BIG_SHARE % of the table's
#           DATA_LENGTH on node1, paths BIG_PATHS, modes BIG_MODES; the no-cache proxy's RSS is the base RSS.
#           The cache proxy runs with GOMEMLIMIT = its memory + BIG_BASE_MB MiB (BIG_BASE_MB=0: no limit), the Go
#           runtime's soft limit that keeps the heap's headroom from doubling the cache (docs/result-cache.md,
#           Memory). The default, 20, is what the Go runtime of the proxy without cache holds under this load
#           (go_memstats_sys_bytes - heap_released: 20.5 MB on 2026-11-28, of an RSS of 41.3 MB; the rest is the
#           program's own pages, which the limit does not count); env.txt records both for each proxy
# Per run: QPS, p95, errors, CPU seconds of the path's process (relay or proxy) and of both mariadbd (/proc),
# the proxy's RSS, and for cache the deltas of /stats' "cache" counters (hits, misses, fills, bypassed), for
# qcache the delta of Qcache_hits. Results: $OUT/results.csv, $OUT/report.md (medians over ROUNDS rounds,
# ratios to direct per round, then their median and range), raw sysbench outputs in $OUT/raw/.
# Proxies and relay are stopped at exit (by pid); the cluster keeps running (bench/cluster.sh stop).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

WORKLOADS=${WORKLOADS:-"point mixed"}
PATHS=${PATHS:-"direct relay proxy cache qcache"}
BIG_PATHS=${BIG_PATHS:-"direct proxy cache"}
BIG_MODES=${BIG_MODES:-disable}
THREADS=${THREADS:-16}
MODES=${MODES:-disable} # "disable auto" once the cache serves the binary protocol
DURATION=${DURATION:-15}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-5}
TABLE_SIZE=${TABLE_SIZE:-10000}
BIG_ROWS=${BIG_ROWS:-1000000}
BIG_SHARE=${BIG_SHARE:-10}
BIG_BASE_MB=${BIG_BASE_MB:-20}
UPDATE_PCT=${UPDATE_PCT:-5}
QC_SIZE=${QC_SIZE:-67108864}
CACHE_CONFIG=${CACHE_CONFIG:-etc/ks-cache.yaml}
PROXY_CONFIG=${PROXY_CONFIG:-etc/ks.yaml}
LOG_LEVEL=${LOG_LEVEL:-warn}
CLUSTER=${CLUSTER:-1}
PREPARE=${PREPARE:-1}
OUT=${OUT:-bench/results/$(date +%Y-%m-%d)-cache}
export PORTS=${PORTS:-"3307 3308"}
RELAY_ADDR=127.0.0.1:9695
DB_HOST=127.0.0.1
DB_PORT=${PORTS%% *}
DB_USER=shardgate DB_PASS=shardgate DB_NAME=sbtest
CLK_TCK=$(getconf CLK_TCK)

die() { echo "cache.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
for v in DURATION ROUNDS WARMUP TABLE_SIZE BIG_ROWS BIG_SHARE BIG_BASE_MB UPDATE_PCT THREADS; do
	[[ ${!v// /} =~ ^[0-9]+$ ]] || die "$v must be whole numbers, got '${!v}'"
done

mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.csv

# ---------------------------------------------------------------------------
BG_PIDS=()
QC_SAVED="" # "size type" while qcache has them changed
qc_restore() {
	[[ -n $QC_SAVED ]] || return 0
	read -r s t <<<"$QC_SAVED"
	mysql_node "$DB_PORT" "SET GLOBAL query_cache_type=$t; SET GLOBAL query_cache_size=$s" || log "WARNING: could not restore the query cache to size $s type $t"
	QC_SAVED=""
}
cleanup() {
	local pid i
	qc_restore || true
	for pid in "${BG_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${BG_PIDS[@]}"; do
		for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
cfg_get() { sed -nE "s/^$2[[:space:]]*:[[:space:]]*['\"]?([^'\" #]*).*/\1/p" "$1" | head -n1; }
cpu_ticks() {
	local pid sum="" t
	for pid in "$@"; do
		[[ -r /proc/$pid/stat ]] || continue
		t=$(sed -E 's/^.*\) //' "/proc/$pid/stat" | awk '{print $12 + $13}') || continue
		sum=$((${sum:-0} + t))
	done
	echo "$sum"
}
cpu_seconds() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz }' || echo ""; }
rss_kb() { [[ -r /proc/$1/status ]] && awk '/^VmRSS:/ {print $2}' "/proc/$1/status" || echo ""; }
mysql_node() { mariadb --no-defaults -h"$DB_HOST" -P"$1" -u"$DB_USER" -p"$DB_PASS" -N -B -e "$2"; }

# cache_counters WEBADDR: "hits misses fills bypassed entries bytes" from /stats' "cache".
cache_counters() {
	curl -fsS --max-time 3 "http://$1/stats" 2>/dev/null |
		jq -r '.cache // {} | "\(.hits_total // .Hits // "") \(.misses_total // .Misses // "") \(.fills_total // .Fills // "") \(.bypassed_total // .Bypassed // "") \(.entries // .Entries // "") \(.bytes // .Bytes // "")"' 2>/dev/null || echo ""
}
qc_hits() { mysql_node "$DB_PORT" "SHOW GLOBAL STATUS LIKE 'Qcache_hits'" 2>/dev/null | awk '{print $2}'; }

# start_bg NAME PORT CMD...: start a measured process; PID[NAME] or FAIL[NAME].
declare -A HOST PORT PID WEB FAIL
start_bg() {
	local name=$1 port=$2 pid i
	shift 2
	port_in_use "$port" && { FAIL[$name]="port $port already in use"; return; }
	"$@" >"$OUT/$name.log" 2>&1 &
	pid=$!
	BG_PIDS+=("$pid")
	for ((i = 0; i < 150; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		if port_in_use "$port"; then
			PID[$name]=$pid
			log "$name is up (pid $pid, port $port)"
			return
		fi
		sleep 0.1
	done
	FAIL[$name]="did not start (see $name.log: $(tail -n1 "$OUT/$name.log"))"
	log "$name: ${FAIL[$name]}"
}
start_proxy() { # NAME CONFIG [VAR=VALUE...: the proxy's environment]
	local addr web name=$1 cfg=$2
	shift 2
	addr=$(cfg_get "$cfg" addr) web=$(cfg_get "$cfg" web_addr)
	HOST[$name]=${addr%:*} PORT[$name]=${addr##*:} WEB[$name]=$web
	start_bg "$name" "${PORT[$name]}" env "$@" bin/proxy -config "$cfg" -log-level "$LOG_LEVEL"
}
stop_bg() { # NAME
	local pid=${PID[$1]:-} i
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	unset "PID[$1]"
}

# ---------------------------------------------------------------------------
load1=$(cut -d' ' -f1 /proc/loadavg)
awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }' && log "WARNING: load average is $load1 before starting; results will be noisy"
if [[ $CLUSTER == 1 ]]; then
	log "starting the MariaDB cluster (bench/cluster.sh start, PORTS=$PORTS)"
	bench/cluster.sh start >&2 || die "bench/cluster.sh start failed"
fi
DB_PIDS=()
for p in $PORTS; do
	for pid in $(ss -Hltnp "sport = :$p" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do DB_PIDS+=("$pid"); done
	# The cache reads the binary logs: log_bin, ROW, FULL row image and FULL row metadata.
	got=$(mysql_node "$p" "SELECT CONCAT_WS(' ', @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata)") ||
		die "cannot reach MariaDB on port $p"
	[[ $got =~ ^(1|ON)\ ROW\ FULL\ FULL$ ]] || log "WARNING: node on port $p has log_bin/format/image/metadata = $got; the cache needs ON ROW FULL FULL"
	echo "binlog on $p (log_bin format row_image row_metadata)=$got" >>"$OUT/env.txt"
done

mkdir -p bin
go build -o bin/proxy ./cmd/proxy >"$OUT/build.log" 2>&1 || die "bin/proxy does not build (see $OUT/build.log)"
go build -o bin/relay ./bench/relay >>"$OUT/build.log" 2>&1 || die "bin/relay does not build"
go build -o bin/bench-report ./bench/report >>"$OUT/build.log" 2>&1 || die "bench/report does not build"

want() { [[ " $PATHS $([[ $WORKLOADS == *big* ]] && echo "$BIG_PATHS") " == *" $1 "* ]]; }
HOST[direct]=$DB_HOST PORT[direct]=$DB_PORT HOST[qcache]=$DB_HOST PORT[qcache]=$DB_PORT
HOST[relay]=${RELAY_ADDR%:*} PORT[relay]=${RELAY_ADDR##*:}
want relay && start_bg relay "${PORT[relay]}" bin/relay -listen "$RELAY_ADDR" -target "$DB_HOST:$DB_PORT"
start_proxy proxy "$PROXY_CONFIG" # also loads the sharded data
[[ -z ${FAIL[proxy]:-} ]] || die "the proxy without cache did not start: ${FAIL[proxy]}"

SB_BASE=(--db-driver=mysql --mysql-user="$DB_USER" --mysql-password="$DB_PASS" --mysql-db="$DB_NAME" --tables=1)
# load ROWS: sbtest1 on node1 directly and through the sharded proxy.
load() {
	log "loading 1 x $1 rows into $DB_NAME on node1 and through the proxy"
	{
		sysbench oltp_read_write "${SB_BASE[@]}" --table-size="$1" --mysql-host="$DB_HOST" --mysql-port="$DB_PORT" cleanup &&
			sysbench oltp_read_write "${SB_BASE[@]}" --table-size="$1" --mysql-host="$DB_HOST" --mysql-port="$DB_PORT" prepare &&
			sysbench oltp_read_write "${SB_BASE[@]}" --table-size="$1" --auto-inc=off --mysql-host="${HOST[proxy]}" --mysql-port="${PORT[proxy]}" cleanup &&
			sysbench oltp_read_write "${SB_BASE[@]}" --table-size="$1" --auto-inc=off --mysql-host="${HOST[proxy]}" --mysql-port="${PORT[proxy]}" prepare
	} >>"$OUT/prepare.log" 2>&1 || die "sysbench prepare failed, see $OUT/prepare.log"
}
[[ $PREPARE == 1 ]] && load "$TABLE_SIZE"
want cache && start_proxy cache "$CACHE_CONFIG"

# run_sb PATH WORKLOAD MODE THREADS SECONDS ROWS OUTFILE
run_sb() {
	local script=oltp_point_select extra=()
	[[ $2 == mixed ]] && script=bench/cache.lua extra=(--update-pct="$UPDATE_PCT")
	timeout --foreground --signal=INT --kill-after=10 $(($5 + 60)) \
		sysbench "$script" "${SB_BASE[@]}" "${extra[@]}" --table-size="$6" --mysql-host="${HOST[$1]}" --mysql-port="${PORT[$1]}" \
		--time="$5" --threads="$4" --db-ps-mode="$3" --report-interval=0 --percentile=95 --histogram=on \
		--rand-type=uniform run >"$7" 2>&1
}

# hit_check WORKLOAD MODE ROWS: a short run through cache, then its hits must be > 0.
hit_check() {
	local a b
	[[ -z ${FAIL[cache]:-} && -n ${PID[cache]:-} ]] || return 0
	read -r a _ <<<"$(cache_counters "${WEB[cache]}")"
	run_sb cache "$1" "$2" 4 3 "$3" "$OUT/raw/hitcheck-$1-$2.txt" || true
	read -r b _ <<<"$(cache_counters "${WEB[cache]}")"
	local n=$((${b:-0} - ${a:-0}))
	echo "hit check $1 $2: $n hits in a 3 s run at 4 threads; /stats cache: $(curl -fsS --max-time 3 "http://${WEB[cache]}/stats" | jq -c '.cache | del(.Nodes, .nodes)')" | tee -a "$OUT/env.txt" >&2
	((n > 0)) || log "WARNING: no cache hits in $1 $2 (see cache.log)"
}

# ---------------------------------------------------------------------------
{
	echo "date=$(date '+%Y-%m-%d %H:%M %Z')"
	echo "commit=$(git rev-parse --short HEAD)$([[ -n $(git status --porcelain -- cmd proxy resultcache router backend mysql config changestream 2>/dev/null | head -n1) ]] && echo ' (uncommitted changes in the proxy)')"
	echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) x $(nproc)"
	echo "kernel=$(uname -r)"
	echo "go=$(go version | sed 's/^go version //')"
	echo "mariadbd=$(mariadbd --version 2>/dev/null | sed -E 's/^.*Ver //')"
	echo "sysbench=$(sysbench --version)"
	echo "load average at start=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "paths=$PATHS; big: $BIG_PATHS"
	echo "workloads=$WORKLOADS; modes=$MODES (big: $BIG_MODES); threads=$THREADS; rounds=$ROUNDS; duration_s=$DURATION; warmup_s=$WARMUP"
	echo "data=1 x $TABLE_SIZE rows (big: $BIG_ROWS), --rand-type=uniform; mixed: $UPDATE_PCT % UPDATE sbtest1 SET k=k+1 WHERE id=? (bench/cache.lua)"
	echo "proxy=$PROXY_CONFIG; cache=$CACHE_CONFIG ($(sed -n '/^cache:/,$p' "$CACHE_CONFIG" | grep -E '^  [a-z]' | sed -E 's/ *#.*//; s/^ +//' | tr '\n' ' '))"
	echo "qcache=node1 with SET GLOBAL query_cache_size=$QC_SIZE, query_cache_type=ON around its runs only (found: $(mysql_node "$DB_PORT" "SELECT CONCAT('size=', @@query_cache_size, ' type=', @@query_cache_type)"))"
} >>"$OUT/env.txt"

echo "workload,mode,threads,round,path,status,$(bin/bench-report -parse-header),proc_cpu_s,db_cpu_s,rss_kb,hits,misses,fills,bypassed,entries,bytes,qc_hits,raw" >"$RESULTS"
EMPTY=$(bin/bench-report -parse-header | sed 's/[^,]//g')

# measure WORKLOAD MODE THREADS ROUND PATH ROWS: one run, one CSV line.
measure() {
	local w=$1 mode=$2 th=$3 r=$4 p=$5 rows=$6 raw pid c0 c1 d0 d1 k0 k1 q0="" q1="" frag=$EMPTY status=ok cpu="" rss="" k=",,,,,"
	raw=raw/$w-$mode-t$th-r$r-$p.txt
	pid=${PID[$p]:-}
	if [[ -n ${FAIL[$p]:-} ]]; then
		echo "$w,$mode,$th,$r,$p,unavailable: ${FAIL[$p]//,/;},$EMPTY,,,,,,,,,,,$raw" >>"$RESULTS"
		return
	fi
	if [[ $p == qcache ]]; then
		QC_SAVED=$(mysql_node "$DB_PORT" "SELECT @@query_cache_size, @@query_cache_type")
		mysql_node "$DB_PORT" "SET GLOBAL query_cache_size=$QC_SIZE; SET GLOBAL query_cache_type=ON" 2>>"$OUT/qcache.log" ||
			{ status="query cache could not be turned on (qcache.log)"; }
		q0=$(qc_hits)
	fi
	[[ $p == cache ]] && k0=$(cache_counters "${WEB[cache]}")
	c0=$([[ -n $pid ]] && cpu_ticks "$pid" || true)
	d0=$(cpu_ticks "${DB_PIDS[@]}")
	if [[ $status == ok ]]; then
		run_sb "$p" "$w" "$mode" "$th" "$DURATION" "$rows" "$OUT/$raw" || status="sysbench failed: $(grep -E '^(FATAL|ALERT)' "$OUT/$raw" | head -n1 | tr ',' ';')"
	fi
	d1=$(cpu_ticks "${DB_PIDS[@]}")
	c1=$([[ -n $pid ]] && cpu_ticks "$pid" || true)
	if [[ -n $pid ]]; then cpu=$(cpu_seconds "$c0" "$c1") rss=$(rss_kb "$pid"); fi
	if [[ $p == cache ]]; then
		k1=$(cache_counters "${WEB[cache]}")
		k=$(awk -v a="$k0" -v b="$k1" 'BEGIN { n = split(a, x, " "); split(b, y, " "); if (n < 6) { print ",,,,,"; exit }
			printf "%d,%d,%d,%d,%d,%d", y[1]-x[1], y[2]-x[2], y[3]-x[3], y[4]-x[4], y[5], y[6] }')
	fi
	if [[ $p == qcache ]]; then
		q1=$(qc_hits)
		qc_restore
	fi
	[[ $status != ok ]] || frag=$(bin/bench-report -parse "$OUT/$raw" 2>/dev/null) || { status="unparsable output"; frag=$EMPTY; }
	echo "$w,$mode,$th,$r,$p,$status,$frag,$cpu,$(cpu_seconds "$d0" "$d1"),$rss,$k,$([[ -n $q0 && -n $q1 ]] && echo $((q1 - q0))),$raw" >>"$RESULTS"
	IFS=, read -r _ qps _ _ _ p95 _ errs _ <<<"$frag"
	log "$w $mode t=$th r=$r $p: $status ${qps:+$qps qps, p95 ${p95}ms, errors $errs}${cpu:+, cpu ${cpu}s}$([[ $p == cache ]] && echo ", cache hits,misses,fills,bypassed,entries,bytes=$k")${q1:+, qc_hits $((q1 - q0))}"
}

# ladder WORKLOAD ROWS PATHS...: warm-up per path, then ROUNDS interleaved rounds for each mode and thread count.
ladder() {
	local w=$1 rows=$2 modes=$MODES mode th r p
	shift 2
	[[ $w != big ]] || modes=$BIG_MODES
	for mode in $modes; do
		hit_check "$w" "$mode" "$rows"
		for th in $THREADS; do
			if ((WARMUP > 0)); then
				for p in "$@"; do
					[[ -z ${FAIL[$p]:-} && $p != qcache ]] || continue
					log "warm-up: $w $mode $th threads, $p, ${WARMUP}s"
					run_sb "$p" "$w" "$mode" "$th" "$WARMUP" "$rows" "$OUT/raw/warmup-$w-$mode-$p.txt" || true
				done
			fi
			for ((r = 1; r <= ROUNDS; r++)); do
				for p in "$@"; do measure "$w" "$mode" "$th" "$r" "$p" "$rows"; done
			done
		done
	done
}

for w in $WORKLOADS; do
	case $w in
	point | mixed) ladder "$w" "$TABLE_SIZE" $PATHS ;;
	big)
		load "$BIG_ROWS"
		size=$(mysql_node "$DB_PORT" "SELECT data_length FROM information_schema.tables WHERE table_schema='$DB_NAME' AND table_name='sbtest1'")
		mem=$((size * BIG_SHARE / 100))
		((mem >= 1 << 20)) || mem=$((1 << 20))
		BIG_CFG=$OUT/ks-cache-big.yaml
		sed -E "s/^  memory: .*/  memory: $mem/" "$CACHE_CONFIG" >"$BIG_CFG"
		echo "big: sbtest1 on node1 DATA_LENGTH=$size bytes; cache memory=$mem ($BIG_SHARE %), config $BIG_CFG" >>"$OUT/env.txt"
		log "big: data $size bytes, cache memory $mem bytes; restarting cache with $BIG_CFG"
		stop_bg cache
		unset "FAIL[cache]"
		limit=()
		((BIG_BASE_MB == 0)) || limit=(GOMEMLIMIT=$((mem + BIG_BASE_MB * 1048576))B)
		start_proxy cache "$BIG_CFG" "${limit[@]}"
		echo "big: cache proxy ${limit[*]:-without GOMEMLIMIT}; RSS after start=$(rss_kb "${PID[cache]:-0}") kB" >>"$OUT/env.txt"
		ladder big "$BIG_ROWS" $BIG_PATHS
		for name in proxy cache; do # what the Go runtime holds (GOMEMLIMIT counts it) and what else is resident
			[[ -n ${PID[$name]:-} && -n ${WEB[$name]:-} ]] || continue
			curl -fsS --max-time 3 "http://${WEB[$name]}/metrics" 2>/dev/null | awk -v n="$name" -v rss="$(rss_kb "${PID[$name]}")" '
				/^go_memstats_sys_bytes / { sys = $2 } /^go_memstats_heap_released_bytes / { rel = $2 }
				END { printf "big: %s after its last run: RSS %d kB, Go runtime (sys - heap released) %d kB, the rest %d kB\n", n, rss, (sys - rel) / 1024, rss - (sys - rel) / 1024 }' >>"$OUT/env.txt" || true
		done
		;;
	*) die "unknown workload $w (point, mixed, big)" ;;
	esac
done
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"

# ---------------------------------------------------------------------------
# Report: per workload x mode x threads x path, medians over rounds; ratios to direct per round, then median and range.
{
	echo "# Result cache benchmark ($(date +%Y-%m-%d))"
	echo
	echo "\`$0\` with WORKLOADS=\"$WORKLOADS\" MODES=\"$MODES\" THREADS=\"$THREADS\" ROUNDS=$ROUNDS DURATION=$DURATION."
	echo
	echo '```'
	cat "$OUT/env.txt"
	echo '```'
	echo
	echo "QPS: median over rounds (min-max). x direct: the path's QPS / direct's in the same round, median (min-max)."
	echo "CPU us/q: CPU microseconds per query of the path's own process (relay or proxy) and of both mariadbd."
	echo "hit ratio: cache hits / statements sysbench ran (qcache: Qcache_hits / statements). RSS: the proxy's at the end of its last run."
	echo
	echo "| workload | mode | threads | path | QPS | x direct | p95 ms | proc CPU us/q | mariadb CPU us/q | hit ratio | fills/run | RSS MB | errors |"
	echo "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	awk -F, '
		function median(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n == 0 ? "" : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) }
		function lo(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 < m + 0) m = a[i]; return m }
		function hi(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 > m + 0) m = a[i]; return m }
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		{
			cell = $1 SUBSEP $2 SUBSEP $3; key = cell SUBSEP $5
			if (!(cell in seen)) { seen[cell] = 1; cells[++nc] = cell }
			if (!(key in pseen)) { pseen[key] = 1; paths[cell] = paths[cell] " " $5 }
			if ($col["status"] != "ok") { bad[key] = $col["status"]; next }
			q = $col["queries"]; qps[key] = qps[key] " " $col["qps"]; p95[key] = p95[key] " " $col["p95_ms"]
			qpsr[cell SUBSEP $4 SUBSEP $5] = $col["qps"]; rounds[cell] = rounds[cell] " " $4
			if ($col["proc_cpu_s"] != "") pc[key] = pc[key] " " ($col["proc_cpu_s"] * 1e6 / q)
			dc[key] = dc[key] " " ($col["db_cpu_s"] * 1e6 / q)
			if ($col["hits"] != "") { hr[key] = hr[key] " " ($col["hits"] / q); fl[key] = fl[key] " " $col["fills"] }
			if ($col["qc_hits"] != "") hr[key] = hr[key] " " ($col["qc_hits"] / q)
			if ($col["rss_kb"] != "") rss[key] = $col["rss_kb"]
			err[key] += $col["errors"]
		}
		END {
			for (c = 1; c <= nc; c++) {
				cell = cells[c]; split(cell, f, SUBSEP); np = split(paths[cell], ps, " ")
				for (i = 1; i <= np; i++) {
					p = ps[i]; key = cell SUBSEP p
					if (qps[key] == "") { printf "| %s | %s | %s | %s | failed: %s | | | | | | | | |\n", f[1], f[2], f[3], p, bad[key]; continue }
					rat = ""; nr = split(rounds[cell], rs, " "); delete done
					for (j = 1; j <= nr; j++) { r = rs[j]; if (r in done) continue; done[r] = 1
						d = qpsr[cell SUBSEP r SUBSEP "direct"]; v = qpsr[cell SUBSEP r SUBSEP p]
						if (d > 0 && v != "") rat = rat " " (v / d) }
					printf "| %s | %s | %s | %s | %.0f (%.0f-%.0f) | %s | %.3f | %s | %.1f | %s | %s | %s | %d |\n", f[1], f[2], f[3], p,
						median(qps[key]), lo(qps[key]), hi(qps[key]),
						(p == "direct" || rat == "") ? "" : sprintf("%.2f (%.2f-%.2f)", median(rat), lo(rat), hi(rat)),
						median(p95[key]), pc[key] == "" ? "" : sprintf("%.1f", median(pc[key])), median(dc[key]),
						hr[key] == "" ? "" : sprintf("%.3f (%.3f-%.3f)", median(hr[key]), lo(hr[key]), hi(hr[key])),
						fl[key] == "" ? "" : sprintf("%.0f", median(fl[key])), rss[key] == "" ? "" : sprintf("%.1f", rss[key] / 1024), err[key]
				}
			}
		}' "$RESULTS"
} >"$OUT/report.md"
log "report: $OUT/report.md"
