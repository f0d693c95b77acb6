#!/usr/bin/env bash
# bench/fleet.sh: what a fleet costs (issue 35), called by `make bench-fleet` (and `make bench`).
#
#  1. cost: bench/run.sh's ladder (direct, relay, proxy) plus the variant "fleet": the same proxy and the same
#     configuration (etc/ks-unsharded.yaml, listeners moved to 9688/9788), but run as one proxy of a fleet on a real
#     etcd (bench/fleet-proxy.sh), interleaved in every round; the report gives QPS, CPU per query and latency of
#     fleet against file side by side.
#  2. propagation: three proxies of a second fleet; bench/fleetprop stores 20 topology versions and times, for each,
#     the interval until every proxy's member record says it applied it (median, min, max).
#
# Knobs: TESTS, THREADS, MODES, DURATION, ROUNDS (passed to run.sh; defaults below), CHANGES (20), ETCD_PORT (2479).
# The etcd runs in a temporary directory and is stopped at exit; the MariaDB cluster is left running, as run.sh does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT=${OUT:-bench/results/$(date +%Y-%m-%d-%H%M)-fleet}
ETCD_PORT=${ETCD_PORT:-2479}
CHANGES=${CHANGES:-20}
mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

scripts/deps.sh mariadb sysbench etcd
bench/cluster.sh start
go build -o bin/proxy ./cmd/proxy
go build -o bin/shardgate ./cmd/shardgate
go build -o bin/fleetprop ./bench/fleetprop

PIDS=()
ETCD_DIR=$(mktemp -d)
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$ETCD_DIR"
}
trap cleanup EXIT
export FLEET_ETCD=http://127.0.0.1:$ETCD_PORT
etcd --name bench --data-dir "$ETCD_DIR/data" --listen-client-urls "$FLEET_ETCD" --advertise-client-urls "$FLEET_ETCD" \
	--listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
	--initial-cluster "bench=http://127.0.0.1:$((ETCD_PORT + 1))" >"$OUT/etcd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
	etcdctl --endpoints "$FLEET_ETCD" endpoint health >/dev/null 2>&1 && break
	sleep 0.1
done
etcdctl --endpoints "$FLEET_ETCD" endpoint health >/dev/null 2>&1 || { echo "fleet.sh: etcd did not start, see $OUT/etcd.log" >&2; exit 1; }
log "etcd $(etcd --version | head -1) up on $FLEET_ETCD"

# 1. Cost of fleet mode on point selects.
FLEET_CFG=$OUT/ks-fleet.yaml
sed -e 's/^addr: .*/addr: 127.0.0.1:9688/' -e 's/^web_addr: .*/web_addr: 127.0.0.1:9788/' etc/ks-unsharded.yaml >"$FLEET_CFG"
export FLEET_CLUSTER=/bench/cost
bin/shardgate -etcd "$FLEET_ETCD" -cluster "$FLEET_CLUSTER" topo load "$FLEET_CFG"
OUT=$OUT/cost PATHS="direct relay proxy" SHARDED_CONFIG="" SPLIT=0 RANGE_CONFIG="" \
	TESTS=${TESTS:-oltp_point_select} THREADS=${THREADS:-"1 16"} MODES=${MODES:-disable} DURATION=${DURATION:-10} \
	ROUNDS=${ROUNDS:-5} VARIANTS="fleet=$FLEET_CFG@bench/fleet-proxy.sh" bench/run.sh

# 2. Propagation to three proxies.
export FLEET_CLUSTER=/bench/prop
bin/shardgate -etcd "$FLEET_ETCD" -cluster "$FLEET_CLUSTER" topo load etc/ks-unsharded.yaml
for i in 1 2 3; do
	bin/proxy -etcd "$FLEET_ETCD" -cluster "$FLEET_CLUSTER" -addr "127.0.0.1:968$i" -web-addr "127.0.0.1:978$i" \
		-log-level warn >"$OUT/prop-proxy$i.log" 2>&1 &
	PIDS+=($!)
done
for _ in $(seq 100); do
	[[ $(bin/shardgate -etcd "$FLEET_ETCD" -cluster "$FLEET_CLUSTER" fleet 2>/dev/null | grep -c '^proxy-') == 3 ]] && break
	sleep 0.1
done
bin/fleetprop -etcd "$FLEET_ETCD" -cluster "$FLEET_CLUSTER" -n "$CHANGES" -members 3 | tee "$OUT/propagation.md"
log "results in $OUT (cost/report.md, propagation.md)"
