#!/usr/bin/env bash
# bench/run.sh: the benchmark ladder (docs/benchmarks.md, How we measure), called by `make bench`.
#
# Runs sysbench against MariaDB directly (B0), through a plain TCP relay (B1),
# through the proxy (B2) and, when SHARDED_CONFIG names a file, through a
# sharded proxy (B3), plus one path per extra proxy named in VARIANTS (the
# same binary with another config, e.g. NODELAY_COMPARE=1's TCP_NODELAY off,
# or another build of the proxy given as name=config@binary). BASELINE=<commit>
# builds that commit's proxy into bin/proxy-base and runs it as the variant
# "baseline" (make bench-compare: before and after in one interleaved run).
# Two optional paths measure the sharding ceiling (SPLIT=1, or "split" and
# "ranged" in PATHS): split runs bench/split.lua directly on node1 against a
# 4-way hash split of the tables (database sbsplit), ranged runs a proxy with
# the range rule of RANGE_CONFIG (database sbrange).
# Paths run interleaved within each round (A B C A B C ...)
# so drift on the shared two cores hits every path alike. Every run's raw
# output goes to $OUT/raw/, one line per run to $OUT/results.csv, and
# bench/report turns those into $OUT/report.md and $OUT/qps.svg.
#
# A path that cannot be built or started (typically the proxy while it is
# being written) is reported as failed in every cell; the other paths still run.
# See bench/README.md for the knobs.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

TESTS=${TESTS:-"oltp_point_select oltp_read_only oltp_read_write"}
THREADS=${THREADS:-"1 16 64"}
MODES=${MODES:-"disable auto"}
DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
TABLE_SIZE=${TABLE_SIZE:-10000}
TABLES=${TABLES:-1}
PATHS=${PATHS:-"direct relay proxy"}
if [[ -z ${OUT:-} ]]; then
	OUT=bench/results/$(date +%Y-%m-%d-%H%M)
	[[ ! -e $OUT ]] || OUT=bench/results/$(date +%Y-%m-%d-%H%M%S) # A second run in the same minute.
fi
export PORTS=${PORTS:-"3307 3308"}    # MariaDB ports; the first one is node1. Passed on to cluster.sh.
RELAY_ADDR=${RELAY_ADDR:-127.0.0.1:9695}
RELAY_NODELAY=${RELAY_NODELAY:-true}
PROXY_CONFIG=${PROXY_CONFIG:-etc/ks-unsharded.yaml}
LOG_LEVEL=${LOG_LEVEL:-warn}
SHARDED_CONFIG=${SHARDED_CONFIG-etc/ks.yaml} # "" skips the sharded row
SHARDED_PREPARE=${SHARDED_PREPARE:-} # Shell command that loads the sharded data; default: sysbench prepare through it.
VARIANTS=${VARIANTS:-}               # "name=config[@binary] ...": extra proxies with other configs (and binaries), one path each, after the others.
NODELAY_COMPARE=${NODELAY_COMPARE:-0} # 1: add variant proxy-nodelay-off ($PROXY_CONFIG with TCP_NODELAY off on both sides).
BASELINE=${BASELINE:-}               # A commit: its cmd/proxy (git archive, built as bin/proxy-base) runs as the path "baseline" beside proxy.
BASELINE_CONFIG=${BASELINE_CONFIG:-$PROXY_CONFIG} # The baseline's config, copied with its listeners moved to 9691/9791.
TARGET_CPU_RELAY=${TARGET_CPU_RELAY:-1.10} # With BASELINE: the report checks proxy CPU per query / relay's against this...
TARGET_QPS_RELAY=${TARGET_QPS_RELAY:-0.95} # ...and proxy QPS / relay's against this (issue 31's targets).
WARMUP=${WARMUP:-5}                  # Seconds of unrecorded load per path before the first round; 0 skips.
CLUSTER=${CLUSTER:-1}                # 0: do not call bench/cluster.sh, use servers already running on PORTS.
PREPARE=${PREPARE:-1}                # 0: keep the sbtest tables from the previous run.
SKIP_TRX=${SKIP_TRX:-off}            # on: no BEGIN/COMMIT around sysbench's statements (B4: cross-shard reads without transactions).
STRICT=${STRICT:-0}                  # 1: exit 1 when any run failed or reported errors.
SPLIT=${SPLIT:-1}                    # 1 (default): add the paths split and ranged (the sharding ceiling), as if named in PATHS.
SPLIT_PARTS=${SPLIT_PARTS:-4}        # split: parts per table (sbtestN_0000..), row id in part id % SPLIT_PARTS.
RANGE_CONFIG=${RANGE_CONFIG-etc/ks-range.yaml} # ranged: proxy config with a range rule on sbtest1; "" skips the path.

DB_HOST=127.0.0.1 # Never localhost: that is the unix socket.
DB_PORT=${PORTS%% *}
DB_USER=shardgate
DB_PASS=shardgate
DB_NAME=sbtest     # Database of every path but split and ranged.
SPLIT_DB=sbsplit   # split: the parts of each sbtestN, on node1.
RANGE_DB=sbrange   # ranged: the range rule's database (renamed from sbtest in the generated config), on every node.
RANGE_ADDR_PORT=9692 RANGE_WEB_PORT=9792 # ranged: the generated config's addr and web_addr ports.
CLK_TCK=$(getconf CLK_TCK)

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

for v in DURATION ROUNDS TABLE_SIZE TABLES WARMUP; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, got '${!v}'"
done
[[ $TARGET_CPU_RELAY =~ ^[0-9]+(\.[0-9]+)?$ && $TARGET_QPS_RELAY =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
	die "TARGET_CPU_RELAY and TARGET_QPS_RELAY must be numbers, got '$TARGET_CPU_RELAY' and '$TARGET_QPS_RELAY'"
[[ $NODELAY_COMPARE == [01] ]] || die "NODELAY_COMPARE must be 0 or 1, got '$NODELAY_COMPARE'"
[[ $SPLIT == [01] ]] || die "SPLIT must be 0 or 1, got '$SPLIT'"
[[ $SPLIT_PARTS =~ ^[1-9][0-9]*$ ]] || die "SPLIT_PARTS must be a positive integer, got '$SPLIT_PARTS'"
for t in $THREADS; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "THREADS must be positive integers, got '$t'"; done
command -v sysbench >/dev/null || die "sysbench not found"
command -v go >/dev/null || die "go not found"

mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.csv
ENVFILE=$OUT/env.txt
log "results go to $OUT"

# ---------------------------------------------------------------------------
# Background processes we start; only these are stopped at exit, by pid.
BG_PIDS=()
cleanup() {
	local pid i
	for pid in "${BG_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${BG_PIDS[@]}"; do
		for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
	[[ -z ${BASELINE_SRC:-} ]] || rm -rf "$BASELINE_SRC"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# port_in_use PORT: something listens on 127.0.0.1:PORT or any address.
port_in_use() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }

# wait_listen PID PORT: wait until PID is alive and the port listens (15 s).
wait_listen() {
	local pid=$1 port=$2 i
	for ((i = 0; i < 150; i++)); do
		kill -0 "$pid" 2>/dev/null || return 1
		port_in_use "$port" && return 0
		sleep 0.1
	done
	return 1
}

# listener_pid PORT: pid of the process listening on PORT, if ss can tell.
listener_pid() { ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2; }

# is_descendant PID ANCESTOR
is_descendant() {
	local p=$1
	while [[ -n $p && $p != 0 && $p != 1 ]]; do
		[[ $p == "$2" ]] && return 0
		p=$(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null) || return 1
	done
	return 1
}

# exit_note PID: set EXIT_NOTE to how a process we started ended ("exited with
# status 2", "killed by signal 9"). Not for $(...): wait needs this shell.
exit_note() {
	local st=0
	wait "$1" 2>/dev/null || st=$?
	if ((st == 127)); then
		EXIT_NOTE="exited"
	elif ((st > 128)); then
		EXIT_NOTE="was killed by signal $((st - 128))"
	else
		EXIT_NOTE="exited with status $st"
	fi
}

# cfg_get FILE KEY: value of a top-level "key: value" in a YAML file.
cfg_get() {
	sed -nE "s/^$2[[:space:]]*:[[:space:]]*['\"]?([^'\" #]*).*/\1/p" "$1" | head -n1
}

# connect_host HOST: the address to dial for a listen host.
connect_host() { case $1 in "" | 0.0.0.0 | "[::]" | "::") echo 127.0.0.1 ;; *) echo "$1" ;; esac; }

# cpu_ticks PID...: utime+stime summed over the pids, empty if none is readable.
cpu_ticks() {
	local pid sum="" t
	for pid in "$@"; do
		[[ -r /proc/$pid/stat ]] || continue
		# Strip "pid (comm) " first: comm may contain spaces and parentheses.
		t=$(sed -E 's/^.*\) //' "/proc/$pid/stat" | awk '{print $12 + $13}') || continue
		sum=$((${sum:-0} + t))
	done
	echo "$sum"
}
cpu_seconds() { # BEFORE AFTER
	[[ -n $1 && -n $2 ]] || { echo ""; return; }
	awk -v a="$1" -v b="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz }'
}
rss_kb() { [[ -r /proc/$1/status ]] && awk '/^VmRSS:/ {print $2}' "/proc/$1/status" || echo ""; }

# memstats WEBADDR: "mallocs gcs" from net/http/pprof's heap?debug=1 (runtime.MemStats),
# or nothing when the admin listener does not serve it.
memstats() {
	[[ -n $1 ]] || return 0
	curl -fsS --max-time 3 "http://$1/debug/pprof/heap?debug=1" 2>/dev/null |
		awk '/^# Mallocs = / {m = $4} /^# NumGC = / {g = $4} END {if (m != "") print m, g}' || true
}
delta() { [[ -n $1 && -n $2 ]] && echo $(($2 - $1)) || echo ""; }

# csv_safe: one-line status text without commas or quotes.
csv_safe() { tr '\n,"' ' ;'"'" | cut -c1-160 | sed -E 's/[[:space:]]+$//'; }

# Everything shares two cores: another busy process skews every number.
load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
	log "WARNING: load average is $load1 before starting; results will be noisy (see 'top')"
fi

# ---------------------------------------------------------------------------
# Cluster.
if [[ $CLUSTER == 1 && -x bench/cluster.sh ]]; then
	log "starting the MariaDB cluster (bench/cluster.sh start, PORTS=$PORTS)"
	bench/cluster.sh start >&2 || die "bench/cluster.sh start failed"
elif [[ $CLUSTER == 1 ]]; then
	log "WARNING: bench/cluster.sh is missing; using whatever listens on $DB_HOST:$DB_PORT"
fi
mysql_q() { # PORT SQL
	mariadb --no-defaults -h"$DB_HOST" -P"$1" -u"$DB_USER" -p"$DB_PASS" "$DB_NAME" -N -B -e "$2"
}
mysql_q "$DB_PORT" "SELECT 1" >/dev/null 2>&1 ||
	die "cannot run SELECT 1 as $DB_USER on $DB_HOST:$DB_PORT database $DB_NAME; is the cluster up?"

DB_PIDS=()
for p in $PORTS; do
	for pid in $(ss -Hltnp "sport = :$p" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
		DB_PIDS+=("$pid")
	done
done
[[ ${#DB_PIDS[@]} -gt 0 ]] || log "WARNING: cannot find the mariadbd pids on ports $PORTS; DB CPU will be blank"

# ---------------------------------------------------------------------------
# Paths: where each listens and which process to measure. FAIL holds why a
# path cannot run; its cells are then written as failed without running.
# DBNAME is the database a path's sysbench uses when it is not $DB_NAME.
declare -A HOST PORT PID WEB FAIL DBNAME
ALL_PATHS=()
want_path() { local p; for p in "${ALL_PATHS[@]}"; do [[ $p == "$1" ]] && return 0; done; return 1; }
WANT_RANGED=$SPLIT
for p in $PATHS; do
	case $p in
	sharded) ;;             # Comes from SHARDED_CONFIG, after the others.
	ranged) WANT_RANGED=1 ;; # Comes from RANGE_CONFIG, after sharded.
	*) want_path "$p" || ALL_PATHS+=("$p") ;;
	esac
done
if [[ $SPLIT == 1 ]] && ! want_path split; then ALL_PATHS+=(split); fi
SHARDED_NOTE="skipped (SHARDED_CONFIG unset)"
if [[ -n $SHARDED_CONFIG ]]; then
	if [[ -f $SHARDED_CONFIG ]]; then
		ALL_PATHS+=(sharded)
		SHARDED_NOTE=$SHARDED_CONFIG
	else
		SHARDED_NOTE="skipped ($SHARDED_CONFIG not found)"
		log "SHARDED_CONFIG=$SHARDED_CONFIG not found; skipping the sharded row"
	fi
fi
RANGED_NOTE="not run (add ranged to PATHS, or SPLIT=1)"
if [[ $WANT_RANGED == 1 ]]; then
	if [[ -z $RANGE_CONFIG ]]; then
		RANGED_NOTE="skipped (RANGE_CONFIG empty)"
		log "RANGE_CONFIG is empty; skipping the ranged row"
	elif [[ -f $RANGE_CONFIG ]]; then
		ALL_PATHS+=(ranged)
		RANGED_NOTE="$RANGE_CONFIG as $OUT/ks-ranged.yaml: addr port $RANGE_ADDR_PORT, web_addr port $RANGE_WEB_PORT, no metrics listener, rule database $DB_NAME renamed to $RANGE_DB"
	else
		RANGED_NOTE="skipped ($RANGE_CONFIG not found)"
		log "RANGE_CONFIG=$RANGE_CONFIG not found; skipping the ranged row"
	fi
fi
for p in "${ALL_PATHS[@]}"; do
	case $p in direct | relay | proxy | sharded | split | ranged) ;; *) die "unknown path '$p' in PATHS (want some of: direct split relay proxy sharded ranged; other proxy configs go in VARIANTS)" ;; esac
done
HOST[direct]=$DB_HOST PORT[direct]=$DB_PORT PID[direct]="" WEB[direct]=""
# split: bench/split.lua directly on node1, against the parts in $SPLIT_DB.
HOST[split]=$DB_HOST PORT[split]=$DB_PORT PID[split]="" WEB[split]="" DBNAME[split]=$SPLIT_DB
DBNAME[ranged]=$RANGE_DB
# split_supports TEST: bench/split.lua mirrors this sysbench test.
split_supports() { case $1 in oltp_read_only | oltp_point_select) return 0 ;; *) return 1 ;; esac; }

# Variants: more proxies, each with its own config, as paths after the others.
# move_listeners SRC ADDRPORT WEBPORT WHY: SRC on stdout with addr on port
# ADDRPORT and web_addr on port WEBPORT (same hosts; an empty or missing
# web_addr stays empty) and no metrics listener, each changed line marked WHY.
move_listeners() {
	local src=$1 addr web
	addr=$(cfg_get "$src" addr)
	addr=${addr:-127.0.0.1:9696}
	web=$(cfg_get "$src" web_addr)
	awk -v addr="${addr%:*}:$2" -v web="${web:+${web%:*}:$3}" -v why="$4" '
	/^addr[[:space:]]*:/ { print "addr: \"" addr "\"  # run.sh: " why; seen = 1; next }
	/^web_addr[[:space:]]*:/ { print "web_addr: \"" web "\"  # run.sh: " why; next }
	/^prometheus_addr[[:space:]]*:/ { print "prometheus_addr: \"\"  # run.sh: would clash with the main proxy"; next }
	{ print }
	END { if (!seen) print "addr: \"" addr "\"  # run.sh: " why }' "$src"
}
# make_nodelay_off SRC DST: SRC with its own addr (port 9693), web_addr (port
# 9793, only if SRC has one), no metrics listener and TCP_NODELAY off on the
# client and the backend sockets. SRC must not define frontend: or backend:
# (repeated keys are an error in the strict config).
make_nodelay_off() {
	{
		move_listeners "$1" 9693 9793 "the proxy-nodelay-off variant"
		printf '%s\n' '' "# Added by bench/run.sh (NODELAY_COMPARE=1): TCP_NODELAY off on client and backend sockets." \
			'frontend:' '  nodelay: false' 'backend:' '  nodelay: false'
	} >"$2"
}
if [[ $NODELAY_COMPARE == 1 ]]; then
	[[ -f $PROXY_CONFIG ]] || die "NODELAY_COMPARE=1 copies PROXY_CONFIG, but $PROXY_CONFIG is not found"
	if grep -qE "^[\"']?(frontend|backend)[\"']?[[:space:]]*:" "$PROXY_CONFIG"; then
		die "NODELAY_COMPARE=1 appends top-level frontend: and backend: sections, but $PROXY_CONFIG already defines" \
			"$(grep -oE "^[\"']?(frontend|backend)[\"']?" "$PROXY_CONFIG" | tr -d "\"'" | paste -sd/ -):" \
			"a repeated key is an error in the strict config; write the variant config yourself and pass it in VARIANTS"
	fi
	make_nodelay_off "$PROXY_CONFIG" "$OUT/ks-nodelay-off.yaml"
	VARIANTS="${VARIANTS:+$VARIANTS }proxy-nodelay-off=$OUT/ks-nodelay-off.yaml"
	log "NODELAY_COMPARE=1: variant proxy-nodelay-off uses $OUT/ks-nodelay-off.yaml"
fi

# BASELINE: the proxy of an older commit, built from git archive (uncommitted
# changes and the working tree stay out of it) into bin/proxy-base, runs as
# the first variant, "baseline", with a copy of BASELINE_CONFIG on ports
# 9691/9791; the report compares proxy with it round by round. In even rounds
# it runs before proxy, in odd ones after, so neither gains from its place.
BASELINE_NOTE=""
if [[ -n $BASELINE ]]; then
	BASELINE_REV=$(git rev-parse --verify -q "$BASELINE^{commit}") || die "BASELINE=$BASELINE is not a commit"
	[[ -f $BASELINE_CONFIG ]] || die "BASELINE_CONFIG $BASELINE_CONFIG not found"
	log "building the baseline proxy from git archive of $(git rev-parse --short=12 "$BASELINE_REV") into bin/proxy-base"
	mkdir -p bin
	BASELINE_SRC=$(mktemp -d) # Removed here, or by cleanup when interrupted.
	git archive "$BASELINE_REV" | tar -x -C "$BASELINE_SRC"
	bin_base=$PWD/bin/proxy-base
	(cd "$BASELINE_SRC" && go build -o "$bin_base" ./cmd/proxy) >"$OUT/build-baseline.log" 2>&1 ||
		die "the proxy of $BASELINE does not build, see $OUT/build-baseline.log"
	rm -rf "$BASELINE_SRC"
	BASELINE_SRC=""
	move_listeners "$BASELINE_CONFIG" 9691 9791 "the baseline path" >"$OUT/ks-baseline.yaml"
	VARIANTS="baseline=$OUT/ks-baseline.yaml@bin/proxy-base${VARIANTS:+ $VARIANTS}"
	subject=$(git log -1 --format=%s "$BASELINE_REV")
	((${#subject} <= 72)) || subject="${subject:0:71}…"
	BASELINE_NOTE="commit $(git log -1 --format='%h of %cs' "$BASELINE_REV") (\"$subject\", BASELINE=$BASELINE), built from git archive as bin/proxy-base; config $OUT/ks-baseline.yaml ($BASELINE_CONFIG, addr port 9691, web_addr port 9791); runs before proxy in even rounds, after it in odd ones"
fi

# make_ranged SRC DST: SRC with its own addr (port $RANGE_ADDR_PORT), web_addr
# (port $RANGE_WEB_PORT), no metrics listener, and its shard rules on database
# $DB_NAME moved to $RANGE_DB, so that it does not collide with the sharded
# path's proxy or tables. Fails when SRC has no rule on $DB_NAME.
make_ranged() {
	local src=$1 dst=$2 addr web
	addr=$(cfg_get "$src" addr)
	addr=${addr:-127.0.0.1:9696}
	web=$(cfg_get "$src" web_addr)
	web=${web:-127.0.0.1:9796}
	awk -v addr="${addr%:*}:$RANGE_ADDR_PORT" -v web="${web%:*}:$RANGE_WEB_PORT" -v from="$DB_NAME" -v to="$RANGE_DB" '
	/^addr[[:space:]]*:/ { print "addr: \"" addr "\"  # run.sh: the ranged path"; a = 1; next }
	/^web_addr[[:space:]]*:/ { print "web_addr: \"" web "\"  # run.sh: the ranged path"; w = 1; next }
	/^prometheus_addr[[:space:]]*:/ { print "prometheus_addr: \"\"  # run.sh: would clash with the other proxies"; next }
	match($0, /^[[:space:]]*(-[[:space:]]+)?db[[:space:]]*:[[:space:]]*/) {
		v = substr($0, RLENGTH + 1)
		sub(/[[:space:]]*(#.*)?$/, "", v)
		gsub(/["\047]/, "", v)
		if (v == from) { print substr($0, 1, RLENGTH) to "  # run.sh: was " from; n++; next }
	}
	{ print }
	END {
		if (!a) print "addr: \"" addr "\"  # run.sh: the ranged path"
		if (!w) print "web_addr: \"" web "\"  # run.sh: the ranged path"
		exit n == 0
	}' "$src" >"$dst"
}
RANGED_CFG=$OUT/ks-ranged.yaml
if want_path ranged && ! make_ranged "$RANGE_CONFIG" "$RANGED_CFG"; then
	FAIL[ranged]="$RANGE_CONFIG has no shard rule on database $DB_NAME (db: $DB_NAME) to move to $RANGE_DB"
	log "ranged: ${FAIL[ranged]}"
fi

# listen_port ADDR: the port of host:port, or nothing for an empty address.
listen_port() { [[ -n $1 ]] && echo "${1##*:}" || true; }
# proxy_ports CONFIG: "key port" for each listener a proxy config opens.
proxy_ports() {
	local a k
	a=$(cfg_get "$1" addr)
	echo "addr $(listen_port "${a:-127.0.0.1:9696}")"
	for k in web_addr prometheus_addr; do
		a=$(cfg_get "$1" "$k")
		[[ -z $a ]] || echo "$k $(listen_port "$a")"
	done
}
declare -A VARIANT_CFG VARIANT_BIN
VARIANT_NAMES=()
declare -A TAKEN # port -> who listens there, to catch clashes before anything starts.
for p in $PORTS; do TAKEN[$p]="MariaDB"; done
want_path relay && TAKEN[${RELAY_ADDR##*:}]="the relay (RELAY_ADDR)"
if want_path proxy && [[ -f $PROXY_CONFIG ]]; then
	while read -r k port; do TAKEN[$port]="the proxy's $k ($PROXY_CONFIG)"; done < <(proxy_ports "$PROXY_CONFIG")
fi
if want_path sharded; then
	while read -r k port; do TAKEN[$port]=${TAKEN[$port]:-"the sharded proxy's $k ($SHARDED_CONFIG)"}; done < <(proxy_ports "$SHARDED_CONFIG")
fi
if want_path ranged && [[ -z ${FAIL[ranged]:-} ]]; then
	while read -r k port; do
		[[ -z ${TAKEN[$port]:-} ]] || die "ranged: the generated $k port $port is already taken by ${TAKEN[$port]}; move that one"
		TAKEN[$port]="the ranged proxy's $k ($RANGED_CFG)"
	done < <(proxy_ports "$RANGED_CFG")
fi
for v in $VARIANTS; do
	[[ $v == ?*=?* ]] || die "VARIANTS: want name=config_path or name=config_path@binary_path, got '$v'"
	name=${v%%=*} cfg=${v#*=} bin=""
	if [[ $cfg == *@* ]]; then # name=config@binary: this variant runs its own proxy binary.
		bin=${cfg#*@} cfg=${cfg%%@*}
		[[ -n $cfg && -n $bin ]] || die "VARIANTS: want name=config_path@binary_path, got '$v'"
	fi
	[[ $name =~ ^[A-Za-z0-9-]+$ ]] || die "VARIANTS: name '$name' may only hold letters, digits and dashes"
	case ${name,,} in direct | relay | proxy | sharded | split | ranged) die "VARIANTS: '$name' is a built-in path name; pick another" ;; esac
	for n in "${VARIANT_NAMES[@]}"; do
		[[ ${n,,} != "${name,,}" ]] || die "VARIANTS: name '$name' is used twice"
	done
	[[ -f $cfg ]] || die "VARIANTS: $name: config $cfg not found"
	[[ -z $bin || (-f $bin && -x $bin) ]] || die "VARIANTS: $name: binary $bin not found or not executable"
	while read -r k port; do
		[[ -z ${TAKEN[$port]:-} ]] || die "VARIANTS: $name: $k in $cfg uses port $port, already taken by ${TAKEN[$port]}; give each variant its own addr and web_addr"
		TAKEN[$port]="variant $name's $k ($cfg)"
	done < <(proxy_ports "$cfg")
	VARIANT_CFG[$name]=$cfg
	VARIANT_BIN[$name]=${bin:-bin/proxy}
	VARIANT_NAMES+=("$name")
	ALL_PATHS+=("$name")
done

mkdir -p bin
BENCHREPORT=bin/bench-report
go build -o "$BENCHREPORT" ./bench/report 2>"$OUT/build-report.log" || die "bench/report does not build, see $OUT/build-report.log"

# start_bg NAME LISTENPORT CMD...: start a measured process, or set FAIL[NAME].
start_bg() {
	local name=$1 port=$2 pid lpid
	shift 2
	if port_in_use "$port"; then
		FAIL[$name]="port $port already in use by another process"
		return
	fi
	"$@" >"$OUT/$name.log" 2>&1 &
	pid=$!
	BG_PIDS+=("$pid")
	if wait_listen "$pid" "$port"; then
		lpid=$(listener_pid "$port")
		if [[ -n $lpid && $lpid != "$pid" ]] && is_descendant "$lpid" "$pid"; then
			# It forked: measure (and later stop) the process that serves the port.
			log "$name serves port $port from child pid $lpid; measuring that one"
			BG_PIDS+=("$lpid")
			pid=$lpid
		fi
		PID[$name]=$pid
		log "$name is up (pid $pid, port $port)"
	elif kill -0 "$pid" 2>/dev/null; then
		FAIL[$name]="did not listen on port $port within 15 s (see $name.log)"
	else
		exit_note "$pid"
		FAIL[$name]="$EXIT_NOTE at start-up (see $name.log: $(tail -n1 "$OUT/$name.log" | csv_safe))"
	fi
}

if want_path relay; then
	HOST[relay]=$(connect_host "${RELAY_ADDR%:*}") PORT[relay]=${RELAY_ADDR##*:} WEB[relay]=""
	if go build -o bin/relay ./bench/relay >"$OUT/build-relay.log" 2>&1; then
		start_bg relay "${PORT[relay]}" bin/relay -listen "$RELAY_ADDR" -target "$DB_HOST:$DB_PORT" -nodelay="$RELAY_NODELAY"
	else
		FAIL[relay]="build failed (see build-relay.log)"
	fi
fi

# start_proxy NAME CONFIG [BINARY]: BINARY defaults to bin/proxy.
start_proxy() {
	local name=$1 cfg=$2 bin=${3:-bin/proxy} addr web
	if [[ ! -f $cfg ]]; then
		FAIL[$name]="config $cfg not found"
		return
	fi
	addr=$(cfg_get "$cfg" addr)
	addr=${addr:-127.0.0.1:9696}
	web=$(cfg_get "$cfg" web_addr)
	HOST[$name]=$(connect_host "${addr%:*}") PORT[$name]=${addr##*:}
	[[ -n $web ]] && WEB[$name]=$(connect_host "${web%:*}"):${web##*:} || WEB[$name]=""
	start_bg "$name" "${PORT[$name]}" "$bin" -config "$cfg" -log-level "$LOG_LEVEL"
}
# mysql_node PORT SQL: one statement (or several) on a MariaDB node, no default database.
mysql_node() { mariadb --no-defaults -h"$DB_HOST" -P"$1" -u"$DB_USER" -p"$DB_PASS" -N -B -e "$2"; }
if want_path proxy || want_path sharded || want_path ranged || [[ ${#VARIANT_NAMES[@]} -gt 0 ]]; then
	if go build -o bin/proxy ./cmd/proxy >"$OUT/build-proxy.log" 2>&1; then
		want_path proxy && start_proxy proxy "$PROXY_CONFIG"
		if want_path sharded; then
			if want_path proxy && [[ -z ${FAIL[proxy]:-} && $(cfg_get "$SHARDED_CONFIG" addr) == "$(cfg_get "$PROXY_CONFIG" addr)" ]]; then
				FAIL[sharded]="$SHARDED_CONFIG uses the same addr as $PROXY_CONFIG; give it its own addr and web_addr"
			else
				start_proxy sharded "$SHARDED_CONFIG"
			fi
		fi
		if want_path ranged && [[ -z ${FAIL[ranged]:-} ]]; then
			# The range rule's database must exist on every node before the proxy routes to it.
			for p in $PORTS; do
				mysql_node "$p" "CREATE DATABASE IF NOT EXISTS $RANGE_DB" >>"$OUT/prepare-ranged.log" 2>&1 ||
					FAIL[ranged]="cannot create database $RANGE_DB on port $p (see prepare-ranged.log)"
			done
			[[ -n ${FAIL[ranged]:-} ]] || start_proxy ranged "$RANGED_CFG"
		fi
		for v in "${VARIANT_NAMES[@]}"; do start_proxy "$v" "${VARIANT_CFG[$v]}" "${VARIANT_BIN[$v]}"; done
	else
		log "the proxy does not build (see $OUT/build-proxy.log); its cells will be marked failed"
		FAIL[proxy]="build failed (see build-proxy.log)"
		FAIL[sharded]="build failed (see build-proxy.log)"
		FAIL[ranged]="build failed (see build-proxy.log)"
		for v in "${VARIANT_NAMES[@]}"; do
			if [[ ${VARIANT_BIN[$v]} == bin/proxy ]]; then
				FAIL[$v]="build failed (see build-proxy.log)"
			else
				start_proxy "$v" "${VARIANT_CFG[$v]}" "${VARIANT_BIN[$v]}" # Brings its own binary.
			fi
		done
	fi
fi

# ---------------------------------------------------------------------------
# Data: drop and load sbtest on node1 directly, so reruns start clean.
# SB_COMMON has no --mysql-db: each path names its own (DBNAME, default DB_NAME).
SB_COMMON=(--db-driver=mysql --mysql-user="$DB_USER" --mysql-password="$DB_PASS"
	--tables="$TABLES" --table-size="$TABLE_SIZE")
if [[ $PREPARE == 1 ]]; then
	log "loading $TABLES x $TABLE_SIZE rows into $DB_NAME on $DB_HOST:$DB_PORT"
	{
		sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db="$DB_NAME" --mysql-host="$DB_HOST" --mysql-port="$DB_PORT" cleanup &&
			sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db="$DB_NAME" --mysql-host="$DB_HOST" --mysql-port="$DB_PORT" prepare
	} >"$OUT/prepare.log" 2>&1 || die "sysbench prepare failed, see $OUT/prepare.log"
	if want_path sharded && [[ -z ${FAIL[sharded]:-} ]]; then
		log "loading the sharded data through ${HOST[sharded]}:${PORT[sharded]}"
		if [[ -n $SHARDED_PREPARE ]]; then
			SHARDED_HOST=${HOST[sharded]} SHARDED_PORT=${PORT[sharded]} bash -c "$SHARDED_PREPARE" >"$OUT/prepare-sharded.log" 2>&1
		else
			{
				# The shard key must be in every INSERT: sysbench numbers the rows itself.
				sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db="$DB_NAME" --auto-inc=off --mysql-host="${HOST[sharded]}" --mysql-port="${PORT[sharded]}" cleanup &&
					sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db="$DB_NAME" --auto-inc=off --mysql-host="${HOST[sharded]}" --mysql-port="${PORT[sharded]}" prepare
			} >"$OUT/prepare-sharded.log" 2>&1
		fi || FAIL[sharded]="sharded prepare failed (see prepare-sharded.log)"
	fi
fi

# split: each sbtestN of node1 copied into $SPLIT_DB.sbtestN_0000.. (row id in
# part id % SPLIT_PARTS, kingshard's hash rule), rebuilt after every load and
# whenever the parts do not match sbtest (PREPARE=0 on a fresh node, or another
# SPLIT_PARTS).
split_ok() {
	local n k sql parts="" bad="" want
	want=$((TABLES * SPLIT_PARTS))
	[[ $(mysql_node "$DB_PORT" "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '$SPLIT_DB'" 2>/dev/null) == "$want" ]] || return 1
	for ((n = 1; n <= TABLES; n++)); do
		parts="" bad=""
		for ((k = 0; k < SPLIT_PARTS; k++)); do
			parts+=" + (SELECT COUNT(*) FROM $SPLIT_DB.sbtest${n}_$(printf %04d "$k"))"
			bad+=" + (SELECT COUNT(*) FROM $SPLIT_DB.sbtest${n}_$(printf %04d "$k") WHERE id % $SPLIT_PARTS <> $k)"
		done
		sql="SELECT (SELECT COUNT(*) FROM $DB_NAME.sbtest$n) = 0$parts AND 0$bad = 0"
		[[ $(mysql_node "$DB_PORT" "$sql" 2>/dev/null) == 1 ]] || return 1
	done
}
make_split() {
	local n k part sql="DROP DATABASE IF EXISTS $SPLIT_DB; CREATE DATABASE $SPLIT_DB;"
	for ((n = 1; n <= TABLES; n++)); do
		for ((k = 0; k < SPLIT_PARTS; k++)); do
			part=$SPLIT_DB.sbtest${n}_$(printf %04d "$k")
			sql+=" CREATE TABLE $part LIKE $DB_NAME.sbtest$n;"
			sql+=" INSERT INTO $part SELECT * FROM $DB_NAME.sbtest$n WHERE id % $SPLIT_PARTS = $k;"
		done
	done
	echo "$sql" >"$OUT/prepare-split.log"
	mysql_node "$DB_PORT" "$sql" >>"$OUT/prepare-split.log" 2>&1 && split_ok
}
if want_path split; then
	if [[ $PREPARE == 1 ]] || ! split_ok; then
		log "splitting $DB_NAME.sbtest1..$TABLES on $DB_HOST:$DB_PORT into $SPLIT_DB, $SPLIT_PARTS parts each"
		make_split || FAIL[split]="building $SPLIT_DB failed (see prepare-split.log)"
	else
		log "split: $SPLIT_DB matches $DB_NAME (PREPARE=0), kept"
	fi
fi

# ranged: loaded through its proxy, like sharded; with PREPARE=0 only when a
# table does not hold TABLE_SIZE rows.
ranged_ok() {
	local n
	for ((n = 1; n <= TABLES; n++)); do
		[[ $(mariadb --no-defaults -h"${HOST[ranged]}" -P"${PORT[ranged]}" -u"$DB_USER" -p"$DB_PASS" "$RANGE_DB" -N -B \
			-e "SELECT COUNT(*) FROM sbtest$n" 2>/dev/null) == "$TABLE_SIZE" ]] || return 1
	done
}
if want_path ranged && [[ -z ${FAIL[ranged]:-} ]]; then
	if [[ $PREPARE == 1 ]] || ! ranged_ok; then
		log "loading the range-sharded data through ${HOST[ranged]}:${PORT[ranged]} (database $RANGE_DB)"
		{
			sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db="$RANGE_DB" --auto-inc=off --mysql-host="${HOST[ranged]}" --mysql-port="${PORT[ranged]}" cleanup &&
				sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-db="$RANGE_DB" --auto-inc=off --mysql-host="${HOST[ranged]}" --mysql-port="${PORT[ranged]}" prepare
		} >>"$OUT/prepare-ranged.log" 2>&1 || FAIL[ranged]="ranged prepare failed (see prepare-ranged.log)"
	else
		log "ranged: $RANGE_DB holds $TABLES x $TABLE_SIZE rows (PREPARE=0), kept"
	fi
fi

# ---------------------------------------------------------------------------
# Environment block for the report.

# proxy_settings FILE: pool, Nagle, buffer, timeout and logging settings from a
# ks.yaml, whatever their exact key names, as "section[item].key: value".
proxy_settings() {
	awk '
	/^[[:space:]]*(#|$)/ { next }
	{
		line = $0
		sub(/[[:space:]]+#.*$/, "", line)
		match(line, /^[[:space:]]*/)
		indent = RLENGTH
		s = substr(line, indent + 1)
		item = sub(/^-[[:space:]]+/, "", s)
		key = s
		sub(/[[:space:]]*:.*$/, "", key)
		val = s
		if (!sub(/^[^:]*:[[:space:]]*/, "", val)) next
		if (indent == 0) { section = key; name = "" }
		if (item) name = ""
		if (key == "name") name = val
		if (val == "") val = "(empty)"
		if (key ~ /pass/ || key !~ /(pool|conn|nodelay|no_delay|buf|log|timeout|idle|lifetime)/) next
		print "proxy setting=" (indent == 0 ? "" : section (name != "" ? "[" name "]" : "") ".") key ": " val
	}' "$1"
	local s
	for s in frontend backend; do
		grep -q "^$s:" "$1" || echo "proxy setting=$s: not set (built-in defaults)"
	done
}
# variant_note CONFIG: how a variant's settings (as proxy_settings sees them)
# differ from PROXY_CONFIG's, on one line.
variant_note() {
	local main=/dev/null
	[[ -f $PROXY_CONFIG ]] && main=$PROXY_CONFIG
	awk -v mainname="$PROXY_CONFIG" '
	{ sub(/^proxy setting=/, "") }
	NR == FNR { inmain[$0] = 1; order[++n] = $0; next }
	{ invar[$0] = 1; if (!($0 in inmain)) add = add (add == "" ? "" : "; ") $0 }
	END {
		for (i = 1; i <= n; i++) if (!(order[i] in invar)) gone = gone (gone == "" ? "" : "; ") order[i]
		if (add == "" && gone == "") { print "same settings as " mainname " apart from the listeners"; exit }
		s = "differs from " mainname ": " (add == "" ? "(nothing added)" : add)
		if (gone != "") s = s " (instead of: " gone ")"
		print s
	}' <(if [[ $main != /dev/null ]]; then proxy_settings "$main"; fi) <(proxy_settings "$1")
}
{
	echo "date=$(date '+%Y-%m-%d %H:%M %Z')"
	echo "commit=$(git rev-parse --short --verify -q HEAD 2>/dev/null || echo none)$( [[ -n $(git status --porcelain 2>/dev/null | head -n1) ]] && echo ' (uncommitted changes)')"
	echo "cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) x $(grep -c '^processor' /proc/cpuinfo)"
	echo "kernel=$(uname -r)"
	echo "go=$(go version | sed 's/^go version //')"
	echo "mariadbd=$(mariadbd --version 2>/dev/null | sed -E 's/^.*Ver //' || echo unknown)"
	echo "mariadb settings=$(mysql_q "$DB_PORT" "SELECT CONCAT('innodb_buffer_pool_size=', @@innodb_buffer_pool_size DIV 1048576, 'M max_connections=', @@max_connections, ' thread_handling=', @@thread_handling)" 2>/dev/null || echo unknown)"
	echo "sysbench=$(sysbench --version)"
	echo "load average at start=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "GOMAXPROCS=${GOMAXPROCS:-unset (Go default; nproc=$(nproc))}"
	echo "proxy config=$PROXY_CONFIG"
	if [[ -f $PROXY_CONFIG ]]; then
		proxy_settings "$PROXY_CONFIG"
	else
		echo "proxy setting=($PROXY_CONFIG not found)"
	fi
	echo "proxy flags=-log-level $LOG_LEVEL"
	for v in "${VARIANT_NAMES[@]}"; do
		if [[ ${VARIANT_BIN[$v]} == bin/proxy ]]; then
			echo "variant $v=${VARIANT_CFG[$v]}, same binary and flags; $(variant_note "${VARIANT_CFG[$v]}")"
		else
			echo "variant $v=${VARIANT_CFG[$v]}, binary ${VARIANT_BIN[$v]} (sha256 $(sha256sum "${VARIANT_BIN[$v]}" | cut -c1-12)), same flags; $(variant_note "${VARIANT_CFG[$v]}")"
		fi
	done
	if [[ -n $BASELINE_NOTE ]]; then
		echo "baseline=$BASELINE_NOTE"
		echo "target cpu/relay=$TARGET_CPU_RELAY"
		echo "target qps/relay=$TARGET_QPS_RELAY"
	fi
	echo "relay=io.Copy both ways, nodelay=$RELAY_NODELAY"
	echo "sharded=$SHARDED_NOTE"
	want_path split && echo "split=bench/split.lua directly on node1 ($DB_HOST:$DB_PORT), database $SPLIT_DB: each sbtestN in $SPLIT_PARTS parts sbtestN_0000.., row id in part id % $SPLIT_PARTS; point selects go to one part, each range query runs on every part in turn"
	echo "ranged=$RANGED_NOTE"
	echo "tests=$TESTS"
	echo "modes=$MODES"
	echo "threads=$THREADS"
	echo "paths=${ALL_PATHS[*]}"
	echo "rounds=$ROUNDS"
	echo "duration_s=$DURATION"
	echo "warmup_s=$WARMUP"
	echo "data=$TABLES table(s) x $TABLE_SIZE rows, --rand-type=uniform, --skip-trx=$SKIP_TRX"
	for p in "${ALL_PATHS[@]}"; do
		[[ -n ${FAIL[$p]:-} ]] && echo "unavailable=$p: ${FAIL[$p]}"
	done
} >"$ENVFILE"

# ---------------------------------------------------------------------------
# The runs.
# sb_args TEST: options that depend on the test.
sb_args() {
	case $1 in
	oltp_* | select_*) echo "--skip-trx=$SKIP_TRX" ;; # off: explicit BEGIN/COMMIT (the default), stated for the record.
	esac
}

# run_sysbench PATH TEST MODE THREADS DURATION OUTFILE: returns sysbench's exit code.
# The split path runs bench/split.lua with --split-test=TEST (split_supports
# must hold); it declares every option passed here.
run_sysbench() {
	local path=$1 test=$2 mode=$3 threads=$4 dur=$5 out=$6 script=$2 extra=()
	if [[ $path == split ]]; then
		script=bench/split.lua extra=(--split-test="$test" --parts="$SPLIT_PARTS")
	fi
	# --foreground keeps sysbench in our process group so that Ctrl-C reaches it.
	timeout --foreground --signal=INT --kill-after=10 $((dur + 60)) \
		sysbench "$script" "${SB_COMMON[@]}" --mysql-db="${DBNAME[$path]:-$DB_NAME}" "${extra[@]}" \
		--mysql-host="${HOST[$path]}" --mysql-port="${PORT[$path]}" \
		--time="$dur" --threads="$threads" --db-ps-mode="$mode" --report-interval=0 \
		--percentile=95 --histogram=on --rand-type=uniform $(sb_args "$test") run >"$out" 2>&1 # $(sb_args) is split on purpose.
}

if [[ $WARMUP -gt 0 ]]; then
	set -- $TESTS
	wtest=$1
	set -- $MODES
	wmode=$1
	wthreads=$(tr ' ' '\n' <<<"$THREADS" | sort -n | tail -n1)
	for p in "${ALL_PATHS[@]}"; do
		[[ -z ${FAIL[$p]:-} ]] || continue
		ptest=$wtest
		if [[ $p == split ]] && ! split_supports "$ptest"; then # Warm it with the first test it runs, if any.
			ptest=""
			for t in $TESTS; do split_supports "$t" && { ptest=$t; break; }; done
			[[ -n $ptest ]] || continue
		fi
		log "warm-up: $p, $ptest $wmode $wthreads threads, ${WARMUP}s (not recorded)"
		run_sysbench "$p" "$ptest" "$wmode" "$wthreads" "$WARMUP" "$OUT/raw/warmup-$p.txt" ||
			log "warm-up on $p failed (see raw/warmup-$p.txt); its runs will show why"
	done
fi

echo "ts,test,mode,threads,round,path,status,duration_s,$("$BENCHREPORT" -parse-header),proc_cpu_s,proc_rss_kb,db_cpu_s,mallocs,gc_cycles,raw" >"$RESULTS"
EMPTY_FRAGMENT=$("$BENCHREPORT" -parse-header | sed 's/[^,]//g')

n_tests=$(wc -w <<<"$TESTS") n_modes=$(wc -w <<<"$MODES") n_threads=$(wc -w <<<"$THREADS")
total=$((n_tests * n_modes * n_threads * ROUNDS * ${#ALL_PATHS[@]}))
log "$total runs of ${DURATION}s: about $(((total * (DURATION + 2) + 59) / 60)) minutes"

# round_paths ROUND: ROUND_PATHS = the paths in the order this round runs them:
# ALL_PATHS, with proxy and baseline swapped in even rounds.
round_paths() {
	local k
	ROUND_PATHS=("${ALL_PATHS[@]}")
	[[ -n $BASELINE_NOTE && $(($1 % 2)) == 0 ]] || return 0
	local ip="" ib=""
	for k in "${!ROUND_PATHS[@]}"; do
		case ${ROUND_PATHS[$k]} in proxy) ip=$k ;; baseline) ib=$k ;; esac
	done
	[[ -n $ip && -n $ib ]] || return 0
	ROUND_PATHS[$ip]=baseline
	ROUND_PATHS[$ib]=proxy
}

i=0 failed=0 errored=0 notapplicable=0
for test in $TESTS; do
	for mode in $MODES; do
		for threads in $THREADS; do
			for ((round = 1; round <= ROUNDS; round++)); do
				round_paths "$round"
				for path in "${ROUND_PATHS[@]}"; do
					i=$((i + 1))
					raw=raw/$test-$mode-t$threads-r$round-$path.txt
					pid=${PID[$path]:-}
					status=ok fragment=$EMPTY_FRAGMENT cpu="" rss="" dbcpu="" mallocs="" gcs=""
					if [[ $path == split ]] && ! split_supports "$test"; then
						status="unavailable: bench/split.lua mirrors only oltp_read_only and oltp_point_select"
						echo "$status" >"$OUT/$raw"
						notapplicable=$((notapplicable + 1))
					elif [[ -n ${FAIL[$path]:-} ]]; then
						status="unavailable: ${FAIL[$path]}"
						echo "$status" >"$OUT/$raw"
					elif [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
						exit_note "$pid"
						FAIL[$path]="$path $EXIT_NOTE during the benchmark (see $path.log)"
						status="unavailable: ${FAIL[$path]}"
						echo "$status" >"$OUT/$raw"
					else
						read -r m0 g0 <<<"$(memstats "${WEB[$path]}")" || true
						c0=$([[ -n $pid ]] && cpu_ticks "$pid" || true)
						d0=$(cpu_ticks "${DB_PIDS[@]}")
						rc=0
						run_sysbench "$path" "$test" "$mode" "$threads" "$DURATION" "$OUT/$raw" || rc=$?
						d1=$(cpu_ticks "${DB_PIDS[@]}")
						c1=$([[ -n $pid ]] && cpu_ticks "$pid" || true)
						read -r m1 g1 <<<"$(memstats "${WEB[$path]}")" || true
						if [[ -n $pid ]]; then
							cpu=$(cpu_seconds "$c0" "$c1")
							rss=$(rss_kb "$pid")
						fi
						dbcpu=$(cpu_seconds "$d0" "$d1")
						mallocs=$(delta "${m0:-}" "${m1:-}")
						gcs=$(delta "${g0:-}" "${g1:-}")
						if [[ $rc -ne 0 ]]; then
							why=$(grep -E '^(FATAL|ALERT)' "$OUT/$raw" | head -n2 | tr '\n' ' ' || true)
							[[ -n $why ]] || why=$(tail -n1 "$OUT/$raw")
							if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
								exit_note "$pid"
								FAIL[$path]="$path $EXIT_NOTE during the benchmark (see $path.log)"
								why="${FAIL[$path]}; $why"
							fi
							[[ $rc -eq 124 ]] && why="timed out after $((DURATION + 60))s; $why"
							status="sysbench exit $rc: $why"
						elif ! fragment=$("$BENCHREPORT" -parse "$OUT/$raw" 2>&1); then
							status="unparsable output: $fragment"
							fragment=$EMPTY_FRAGMENT
						fi
					fi
					status=$(printf '%s' "$status" | csv_safe)
					echo "$(date +%s),$test,$mode,$threads,$round,$path,$status,$DURATION,$fragment,$cpu,$rss,$dbcpu,$mallocs,$gcs,$raw" >>"$RESULTS"

					if [[ $status == ok ]]; then
						IFS=, read -r _ qps tps _ _ p95 _ errs reconn <<<"$fragment"
						note=""
						if [[ $errs != 0 || $reconn != 0 ]]; then
							note="  <-- $errs errors, $reconn reconnects"
							errored=$((errored + 1))
						fi
						log "[$i/$total] $test $mode t=$threads r=$round $path: $qps qps, $tps tps, p95 ${p95}ms${cpu:+, cpu ${cpu}s}$note"
					elif [[ $path == split ]] && ! split_supports "$test"; then
						log "[$i/$total] $test $mode t=$threads r=$round $path: not applicable"
					else
						failed=$((failed + 1))
						log "[$i/$total] $test $mode t=$threads r=$round $path: FAILED: $status"
					fi
				done
			done
		done
	done
done

# ---------------------------------------------------------------------------
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$ENVFILE"
go run ./bench/report -in "$RESULTS" -out "$OUT"
na_note=""
((notapplicable == 0)) || na_note=", $notapplicable split runs not applicable (tests bench/split.lua does not mirror)"
log "report: $OUT/report.md, chart: $OUT/qps.svg ($failed failed runs, $errored runs with errors$na_note)"
if [[ $STRICT == 1 && $((failed + errored)) -gt 0 ]]; then
	exit 1
fi
