#!/usr/bin/env bash
# bench/kafka.sh: the Kafka sink benchmark, called by `make bench-kafka` (issue 38; about 4 minutes).
#
# Starts two MariaDB servers of its own (bench/cluster.sh with VARDIR=var/bench-kafka/mariadb, on PORTS) and a real
# Kafka broker (scripts/kafka/broker.sh, in var/bench-kafka/broker), then runs bench/kafka (see bench/kafka/main.go):
#   run     canal's table (mixed DML and batch inserts, 1x1 1x3 2x1 2x3 topics x partitions, Debezium and json),
#           the stage funnel with the franz-go anchor, Tunnel's scaling (1/4/8/16 partitions, groups of 1 and 2
#           consumer processes), ROUNDS rounds interleaved;
#   lag     a proxy whose ks.yaml has a stream of sbtest.sbtest1, sysbench oltp_write_only through it (THREADS threads,
#           OLTP_SECONDS s), the lag from its /metrics;
#   report  $OUT/README.md from $OUT/run.json and $OUT/lag.json.
# Servers, broker and proxy are stopped at the end.
#
# Environment: OUT (bench/results/<date>-kafka), ROUNDS (3), SECTIONS (throughput,funnel,profile,scaling; none: keep
# $OUT/run.json and run the lag section alone), LAG (1: run the lag section), OLTP_SECONDS (30), THREADS (16),
# LAG_ROUNDS (1), PORTS ("3351 3352"), PROXY_ADDR (127.0.0.1:9756), WEB_ADDR (127.0.0.1:9757), EXTRA (more flags for
# `kafka run`, e.g. "-mixed-cycles 240 -inserts 50000 -scale-rows 60000"; the defaults are 480 cycles of 170
# changes, 100 000 and 120 000 rows).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-kafka}
ROUNDS=${ROUNDS:-3}
SECTIONS=${SECTIONS:-throughput,funnel,profile,scaling}
LAG=${LAG:-1}
OLTP_SECONDS=${OLTP_SECONDS:-30}
THREADS=${THREADS:-16}
LAG_ROUNDS=${LAG_ROUNDS:-1}
EXTRA=${EXTRA:-}
export VARDIR=${VARDIR:-var/bench-kafka/mariadb}
export PORTS=${PORTS:-"3351 3352"}
read -r PORT1 PORT2 <<<"$PORTS"
PROXY_ADDR=${PROXY_ADDR:-127.0.0.1:9756}
WEB_ADDR=${WEB_ADDR:-127.0.0.1:9757}
BROKER_DIR=var/bench-kafka/broker

die() {
	echo "kafka.sh: $*" >&2
	exit 1
}
command -v sysbench >/dev/null || die "sysbench not found (apt-get install -y sysbench)"
command -v mariadb >/dev/null || die "the mariadb client not found (apt-get install -y mariadb-client)"
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in "${PROXY_ADDR##*:}" "${WEB_ADDR##*:}"; do
	listening "$port" && die "127.0.0.1:$port is taken; set PROXY_ADDR and WEB_ADDR"
done
if ! bench/cluster.sh status >/dev/null 2>&1; then
	for port in $PORTS; do
		listening "$port" && die "127.0.0.1:$port is taken by a server that is not this benchmark's ($VARDIR); set PORTS"
	done
fi

mkdir -p "$OUT" bin
exec > >(tee -a "$OUT/kafka.log") 2>&1
cmdline="make bench-kafka (bench/kafka.sh) ROUNDS=$ROUNDS SECTIONS=$SECTIONS LAG=$LAG OLTP_SECONDS=$OLTP_SECONDS THREADS=$THREADS${EXTRA:+ EXTRA=\"$EXTRA\"}"
if [[ $SECTIONS == none ]]; then echo "$cmdline" >>"$OUT/command.txt"; else echo "$cmdline" >"$OUT/command.txt"; fi
started=$(date +%s)

PROXY=
cleanup() {
	if [[ -n $PROXY ]]; then
		kill "$PROXY" 2>/dev/null || true
		wait "$PROXY" 2>/dev/null || true
	fi
	scripts/kafka/broker.sh stop "$BROKER_DIR" || true
	bench/cluster.sh stop >/dev/null || true
}
trap cleanup EXIT

go build -o bin/proxy ./cmd/proxy
go build -o bin/kafka-bench ./bench/kafka

bench/cluster.sh start
sql() { mariadb --no-defaults -h127.0.0.1 -P"$1" -ushardgate -pshardgate -e "$2"; }
for port in $PORTS; do
	sql "$port" "SET GLOBAL binlog_row_metadata = 'FULL'; DROP DATABASE IF EXISTS kb; DROP DATABASE IF EXISTS sbtest;
		CREATE DATABASE sbtest; DROP DATABASE IF EXISTS shardgate_sidecar;"
	file=$(mariadb --no-defaults -h127.0.0.1 -P"$port" -ushardgate -pshardgate -N -e "FLUSH BINARY LOGS; SHOW MASTER STATUS" | cut -f1)
	sql "$port" "PURGE BINARY LOGS TO '$file'"
done

BROKER=$(scripts/kafka/broker.sh start "$BROKER_DIR")
wrapper=$(<"$BROKER_DIR/kafkabroker.pid")
PIDS="broker=$wrapper"
for p in $(pgrep -P "$wrapper" || true); do PIDS+=",broker=$p"; done
PIDS+=",node1=$(<"$VARDIR/$PORT1/mysqld.pid"),node2=$(<"$VARDIR/$PORT2/mysqld.pid")"
echo "broker $BROKER; CPU of $PIDS"

[[ $SECTIONS == none ]] && mv "$OUT/env.txt" "$OUT/env-run.txt"
{
	echo "commit    $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- kafkasink changestream config proxy cmd || echo ' plus uncommitted changes in kafkasink, changestream, config, proxy or cmd (other agents at work)')"
	echo "started   $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "cpu       $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') x $(nproc)"
	echo "kernel    $(uname -r)"
	echo "go        $(go version | cut -d' ' -f3-)"
	echo "mariadb   $(mariadbd --version 2>/dev/null || /usr/sbin/mariadbd --version 2>/dev/null || echo unknown)"
	echo "sysbench  $(sysbench --version)"
	echo "kafka     $(ls ~/.cache/shardgate/kafka/lib 2>/dev/null | grep -m1 -o '^kafka_2.13-[0-9.]*[0-9]' || echo unknown) (KRaft, one node, scripts/kafka/broker.sh defaults)"
	echo "java      $(java -version 2>&1 | head -1)"
	echo "GOMAXPROCS default ($(nproc)); franz-go $(go list -m -f '{{.Version}}' github.com/twmb/franz-go)"
} >"$OUT/env.txt"

cat >"$OUT/ks.yaml" <<EOF
# bench/kafka.sh: kb.orders and kb.items hash-sharded on id into 2+2 subtables; sysbench's sbtest.sbtest1 likewise.
addr: $PROXY_ADDR
user_list:
  - user: shardgate
    password: shardgate
web_addr: $WEB_ADDR
log_level: warn
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
      - db: kb
        table: orders
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [2, 2]
      - db: kb
        table: items
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [2, 2]
      - db: sbtest
        table: sbtest1
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [2, 2]
        sequence: id
EOF

# SECTIONS=none keeps $OUT/run.json of an earlier run (to run the lag section again alone).
if [[ $SECTIONS != none ]]; then
	bin/kafka-bench run -config "$OUT/ks.yaml" -brokers "$BROKER" -out "$OUT" -rounds "$ROUNDS" -sections "$SECTIONS" -pids "$PIDS" $EXTRA
fi

if [[ $LAG == 1 ]]; then
	{
		cat "$OUT/ks.yaml"
		cat <<EOF
streams:
  - name: lag
    tables: [sbtest.sbtest1]
    brokers: [$BROKER]
EOF
	} >"$OUT/ks-lag.yaml"
	bin/proxy -config "$OUT/ks-lag.yaml" >"$OUT/proxy.log" 2>&1 &
	PROXY=$!
	for _ in $(seq 100); do
		mariadb --no-defaults -h127.0.0.1 -P"${PROXY_ADDR##*:}" -ushardgate -pshardgate -e "SELECT 1" >/dev/null 2>&1 && break
		kill -0 "$PROXY" 2>/dev/null || die "the proxy exited; see $OUT/proxy.log"
		sleep 0.1
	done
	sysbench oltp_write_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="${PROXY_ADDR##*:}" --mysql-user=shardgate \
		--mysql-password=shardgate --mysql-db=sbtest --tables=1 --table-size=10000 --auto-inc=off prepare >"$OUT/prepare.log" 2>&1 ||
		die "sysbench prepare failed, see $OUT/prepare.log"
	bin/kafka-bench lag -web "$WEB_ADDR" -proxy "$PROXY_ADDR" -out "$OUT" -oltp-seconds "$OLTP_SECONDS" -threads "$THREADS" \
		-lag-rounds "$LAG_ROUNDS" -table-size 10000
fi

echo "finished  $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(($(date +%s) - started)) s in all" >>"$OUT/env.txt"
bin/kafka-bench report -out "$OUT"
echo "report: $OUT/README.md"
