#!/usr/bin/env bash
# bench/move.sh: the online-resharding benchmark, called by `make bench-move`.
#
# Starts two MariaDB servers of its own (bench/cluster.sh with VARDIR=var/bench-move, on PORTS: 127.0.0.1:3307, :3308,
# binary logs ROW/FULL/metadata FULL, no replicas), a proxy with sbtest.sbtest1 hash-sharded on id into 1+1
# subtables (its ks.yaml is written to $OUT/ks.yaml), loads ROWS sysbench rows through it, and runs bench/move,
# which reshards the table to 4+4 subtables through the admin API again and again and measures the copy (swept
# over copy workers and batch rows, against mariadb-dump | mariadb and INTO OUTFILE + LOAD DATA anchors), the
# catch-up under sysbench oltp_write_only, the verify, and the cutover and rollback pause under a load client
# (see bench/move/main.go). The report goes to $OUT/report.md (default bench/results/<date>-move). At exit,
# whatever happened, the proxy and the two servers are stopped.
#
# Environment: OUT, ROWS (200000), ROUNDS (3), COPY_WORKERS ("1,2,4,8"), BATCH_ROWS ("100,1000,5000"),
# APPLY_WORKERS ("1,4,16"), CATCHUP_SECONDS (20), THREADS (16), CUTOVERS (5), LOAD_CONNS (8), LOAD_RATE (2000),
# SECTIONS ("copy,catchup,cutover"), VARDIR (var/bench-move), PROXY_REV (empty: the proxy is built from the working
# tree; a commit such as HEAD: built from `git archive` of that commit, so uncommitted changes stay out of it),
# PORTS ("3307 3308": node1 and node2), PROXY_ADDR (127.0.0.1:9696), WEB_ADDR (127.0.0.1:9797).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
START=$(date +%s)

OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-move}
ROWS=${ROWS:-200000}
ROUNDS=${ROUNDS:-3}
COPY_WORKERS=${COPY_WORKERS:-1,2,4,8}
BATCH_ROWS=${BATCH_ROWS:-100,1000,5000}
APPLY_WORKERS=${APPLY_WORKERS:-1,4,16}
CATCHUP_SECONDS=${CATCHUP_SECONDS:-20}
THREADS=${THREADS:-16}
CUTOVERS=${CUTOVERS:-5}
LOAD_CONNS=${LOAD_CONNS:-8}
LOAD_RATE=${LOAD_RATE:-2000}
SECTIONS=${SECTIONS:-copy,catchup,cutover}
# Servers of its own: the default var/mariadb may hold replicas (started with it, replicating every row the
# benchmark writes, on the same two cores), and the benchmark drops and rewrites its databases.
export VARDIR=${VARDIR:-var/bench-move}
export PORTS=${PORTS:-"3307 3308"}
read -r PORT1 PORT2 <<<"$PORTS"
[[ -n ${PORT2:-} ]] || { echo "move.sh: PORTS needs two ports" >&2; exit 1; }
PROXY_ADDR=${PROXY_ADDR:-127.0.0.1:9696}
WEB_ADDR=${WEB_ADDR:-127.0.0.1:9797}

die() {
	echo "move.sh: $*" >&2
	exit 1
}
command -v sysbench >/dev/null || die "sysbench not found (apt-get install -y sysbench)"
command -v mariadb >/dev/null || die "the mariadb client not found (apt-get install -y mariadb-client)"
command -v mariadb-dump >/dev/null || command -v mysqldump >/dev/null ||
	die "neither mariadb-dump nor mysqldump found (apt-get install -y mariadb-client)"
command -v go >/dev/null || die "go not found"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in "${PROXY_ADDR##*:}" "${WEB_ADDR##*:}"; do
	listening "$port" && die "127.0.0.1:$port is taken (another proxy running?); stop it first, or set PROXY_ADDR and WEB_ADDR"
done
if ! bench/cluster.sh status >/dev/null 2>&1; then
	for port in $PORTS; do
		listening "$port" && die "127.0.0.1:$port is taken by a server that is not this benchmark's ($VARDIR); stop it first (bench/cluster.sh stop), or set PORTS"
	done
fi

mkdir -p "$OUT" bin
TMP=$(mktemp -d)
PROXY=
cleanup() {
	if [[ -n $PROXY ]]; then
		kill "$PROXY" 2>/dev/null || true
		wait "$PROXY" 2>/dev/null || true
	fi
	bench/cluster.sh stop >&2 || true
	rm -rf "$TMP"
}
trap cleanup EXIT

bench/cluster.sh start >&2
sql() { mariadb --no-defaults -h127.0.0.1 -P"$1" -ushardgate -pshardgate -e "$2"; }
# A clean slate: no tables of an earlier run (old or new subtables, anchors), no saved workflows (the proxy would
# resume them, or put a cut-over rule in force), no old binary logs.
for port in $PORTS; do
	sql "$port" "SET GLOBAL binlog_row_metadata = 'FULL';
		DROP DATABASE IF EXISTS sbanchor; DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest;
		DROP DATABASE IF EXISTS shardgate_sidecar;"
	file=$(mariadb --no-defaults -h127.0.0.1 -P"$port" -ushardgate -pshardgate -N -e "FLUSH BINARY LOGS; SHOW MASTER STATUS" | cut -f1)
	sql "$port" "PURGE BINARY LOGS TO '$file'"
done

PROXY_BIN=bin/proxy
PROXY_SOURCE=
if [[ -n ${PROXY_REV:-} ]]; then
	rev=$(git rev-parse --short=12 "$PROXY_REV^{commit}") || die "PROXY_REV=$PROXY_REV is not a commit"
	mkdir "$TMP/src"
	git archive "$rev" | tar -x -C "$TMP/src"
	(cd "$TMP/src" && go build -o "$TMP/proxy" ./cmd/proxy)
	PROXY_BIN=$TMP/proxy
	PROXY_SOURCE="commit $rev, built from git archive (uncommitted changes left out)"
else
	go build -o bin/proxy ./cmd/proxy
fi
go build -o bin/move ./bench/move

cat >"$TMP/ks.yaml" <<EOF
# bench/move.sh: sbtest.sbtest1 hash-sharded on id into 1+1 subtables (sbtest1_0000 on node1, sbtest1_0001 on
# node2); a reshard moves it to 4+4 (sbtest1_g1_0000..0007).
addr: $PROXY_ADDR
user_list:
  - user: shardgate
    password: shardgate
web_addr: $WEB_ADDR
log_level: info
proxy_charset: utf8mb4
nodes:
  - name: node1
    master: 127.0.0.1:$PORT1
    user: shardgate
    password: shardgate
    max_conns_limit: 64
  - name: node2
    master: 127.0.0.1:$PORT2
    user: shardgate
    password: shardgate
    max_conns_limit: 64
schema_list:
  - user: shardgate
    nodes: [node1, node2]
    default: node1
    shard:
      - db: sbtest
        table: sbtest1
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [1, 1]
        sequence: id
EOF
cp "$TMP/ks.yaml" "$OUT/ks.yaml"

"$PROXY_BIN" -config "$TMP/ks.yaml" -log-level info >"$OUT/proxy.log" 2>&1 &
PROXY=$!
for _ in $(seq 100); do
	mariadb --no-defaults -h127.0.0.1 -P"${PROXY_ADDR##*:}" -ushardgate -pshardgate -e "SELECT 1" >/dev/null 2>&1 && break
	kill -0 "$PROXY" 2>/dev/null || die "the proxy exited; see $OUT/proxy.log"
	sleep 0.1
done

sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="${PROXY_ADDR##*:}" --mysql-user=shardgate \
	--mysql-password=shardgate --mysql-db=sbtest --tables=1 --table-size="$ROWS" --auto-inc=off prepare >"$OUT/prepare.log" 2>&1 ||
	die "sysbench prepare failed, see $OUT/prepare.log"

DB_PIDS=$(cat "$VARDIR/$PORT1/mysqld.pid"),$(cat "$VARDIR/$PORT2/mysqld.pid")
bin/move -config "$TMP/ks.yaml" -proxy "$PROXY_ADDR" -web "$WEB_ADDR" -out "$OUT" -rows "$ROWS" -rounds "$ROUNDS" \
	-copy-workers "$COPY_WORKERS" -batch-rows "$BATCH_ROWS" -apply-workers "$APPLY_WORKERS" \
	-catchup-seconds "$CATCHUP_SECONDS" -threads "$THREADS" -cutovers "$CUTOVERS" -load-conns "$LOAD_CONNS" \
	-load-rate "$LOAD_RATE" -sections "$SECTIONS" -proxy-pid "$PROXY" -db-pids "$DB_PIDS" -script-start "$START" -proxy-source "$PROXY_SOURCE" \
	2>&1 | tee "$OUT/move.log"
echo "move.sh: done in $(($(date +%s) - START)) s; report $OUT/report.md" >&2
