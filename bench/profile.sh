#!/usr/bin/env bash
# bench/profile.sh: a CPU profile of the proxy under sysbench load, from the admin
# listener's /debug/pprof/profile (BENCH.md: profile under load before optimising).
#
# Starts the cluster (bench/cluster.sh start, left running), builds the proxy
# (the working tree, or REV from git archive), starts it with PROXY_CONFIG
# (stopped at exit, by pid), loads sbtest on node1 when it does not hold
# TABLE_SIZE rows, runs sysbench TEST with THREADS threads and --db-ps-mode=MODE
# for PROFILE_SECONDS+10 s and takes a PROFILE_SECONDS-long profile from its middle. Writes to OUT:
# cpu.pprof, top-flat.txt and top-cum.txt (go tool pprof -top), sysbench.txt,
# proxy.log and build.log.
#
# Knobs: TEST (oltp_point_select), THREADS (16), MODE (disable), PROFILE_SECONDS (20),
# PROXY_CONFIG (etc/ks-unsharded.yaml; needs web_addr), REV (empty: working tree),
# TABLE_SIZE (10000), PORTS ("3307 3308"), CLUSTER (1; 0: use servers already up),
# OUT (bench/results/<date>-profile, or a new name when it exists).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TEST=${TEST:-oltp_point_select}
THREADS=${THREADS:-16}
MODE=${MODE:-disable}
PROFILE_S=${PROFILE_SECONDS:-20}
PROXY_CONFIG=${PROXY_CONFIG:-etc/ks-unsharded.yaml}
REV=${REV:-}
TABLE_SIZE=${TABLE_SIZE:-10000}
export PORTS=${PORTS:-"3307 3308"}
CLUSTER=${CLUSTER:-1}
if [[ -z ${OUT:-} ]]; then
	OUT=bench/results/$(date +%Y-%m-%d)-profile
	[[ ! -e $OUT ]] || OUT=bench/results/$(date +%Y-%m-%d-%H%M%S)-profile
fi
DB_HOST=127.0.0.1 DB_PORT=${PORTS%% *} DB_USER=shardgate DB_PASS=shardgate

die() { echo "profile.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
for v in THREADS PROFILE_S TABLE_SIZE; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"; done
command -v sysbench >/dev/null || die "sysbench not found (scripts/deps.sh sysbench)"
[[ -f $PROXY_CONFIG ]] || die "PROXY_CONFIG $PROXY_CONFIG not found"
cfg_get() { sed -nE "s/^$2[[:space:]]*:[[:space:]]*['\"]?([^'\" #]*).*/\1/p" "$1" | head -n1; }
ADDR=$(cfg_get "$PROXY_CONFIG" addr) WEB=$(cfg_get "$PROXY_CONFIG" web_addr)
[[ -n $ADDR && -n $WEB ]] || die "$PROXY_CONFIG needs addr and web_addr (the profile comes from the admin listener)"
mkdir -p "$OUT"

TMP=$(mktemp -d)
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT

[[ $CLUSTER == 0 ]] || bench/cluster.sh start >&2 || die "bench/cluster.sh start failed"

BIN=$TMP/proxy
if [[ -n $REV ]]; then
	rev=$(git rev-parse --verify -q "$REV^{commit}") || die "REV=$REV is not a commit"
	log "building the proxy of $(git rev-parse --short=12 "$rev") from git archive"
	mkdir "$TMP/src"
	git archive "$rev" | tar -x -C "$TMP/src"
	(cd "$TMP/src" && go build -o "$BIN" ./cmd/proxy) >"$OUT/build.log" 2>&1 || die "build failed, see $OUT/build.log"
	SOURCE="commit $(git rev-parse --short=12 "$rev")"
else
	log "building the proxy from the working tree"
	go build -o "$BIN" ./cmd/proxy >"$OUT/build.log" 2>&1 || die "build failed, see $OUT/build.log"
	SOURCE="working tree at $(git rev-parse --short=12 HEAD)$([[ -z $(git status --porcelain -- . | head -n1) ]] || echo ' with uncommitted changes')"
fi

SB=(--db-driver=mysql --mysql-user="$DB_USER" --mysql-password="$DB_PASS" --mysql-db=sbtest --tables=1 --table-size="$TABLE_SIZE")
rows=$(mariadb --no-defaults -h"$DB_HOST" -P"$DB_PORT" -u"$DB_USER" -p"$DB_PASS" -N -B \
	-e "SELECT COUNT(*) FROM sbtest.sbtest1" 2>/dev/null || true)
if [[ $rows != "$TABLE_SIZE" ]]; then
	log "loading sbtest.sbtest1 ($TABLE_SIZE rows) on $DB_HOST:$DB_PORT"
	{
		sysbench oltp_read_write "${SB[@]}" --mysql-host="$DB_HOST" --mysql-port="$DB_PORT" cleanup &&
			sysbench oltp_read_write "${SB[@]}" --mysql-host="$DB_HOST" --mysql-port="$DB_PORT" prepare
	} >"$OUT/prepare.log" 2>&1 || die "sysbench prepare failed, see $OUT/prepare.log"
fi

"$BIN" -config "$PROXY_CONFIG" -log-level warn >"$OUT/proxy.log" 2>&1 &
PIDS+=($!)
for ((i = 0; i < 150; i++)); do
	curl -fsS --max-time 1 "http://$WEB/debug/pprof/" >/dev/null 2>&1 && break
	kill -0 "${PIDS[0]}" 2>/dev/null || die "the proxy exited, see $OUT/proxy.log"
	sleep 0.1
done

log "sysbench $TEST, $THREADS threads, --db-ps-mode=$MODE, $((PROFILE_S + 10)) s through $ADDR ($SOURCE)"
sysbench "$TEST" "${SB[@]}" --mysql-host="${ADDR%:*}" --mysql-port="${ADDR##*:}" --threads="$THREADS" \
	--db-ps-mode="$MODE" --time=$((PROFILE_S + 10)) --rand-type=uniform --report-interval=0 run >"$OUT/sysbench.txt" 2>&1 &
PIDS+=($!)
sleep 5
log "profiling for $PROFILE_S s"
curl -fsS --max-time $((PROFILE_S + 30)) -o "$OUT/cpu.pprof" "http://$WEB/debug/pprof/profile?seconds=$PROFILE_S" ||
	die "the profile request failed"
wait "${PIDS[1]}" || die "sysbench failed, see $OUT/sysbench.txt"
{
	echo "# $TEST, $THREADS threads, --db-ps-mode=$MODE; $SOURCE; $(grep -E 'queries:' "$OUT/sysbench.txt" | xargs)"
	go tool pprof -top -nodecount=60 "$BIN" "$OUT/cpu.pprof" 2>/dev/null
} >"$OUT/top-flat.txt"
{
	echo "# $TEST, $THREADS threads, --db-ps-mode=$MODE; $SOURCE"
	go tool pprof -top -cum -nodecount=80 "$BIN" "$OUT/cpu.pprof" 2>/dev/null
} >"$OUT/top-cum.txt"
log "wrote $OUT/cpu.pprof, top-flat.txt, top-cum.txt"
