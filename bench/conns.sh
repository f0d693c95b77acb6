#!/usr/bin/env bash
# bench/conns.sh: what client connections cost the proxy (issue: 5,000 idle
# client connections under 150 MB RSS; 100,000 connect-query-disconnect
# cycles leave goroutines, file descriptors and RSS at their baseline).
#
# Starts the local cluster (bench/cluster.sh), one proxy with $CONFIG, runs
# bin/conns against it and writes $OUT/conns.md. Knobs:
#   CONFIG   proxy config (default etc/ks-unsharded.yaml: addr :9694, web_addr :9794)
#   IDLE     idle connections held at once (default 5000)
#   CYCLES   connect-query-quit cycles (default 100000)
#   WORKERS  concurrent dials (default 8)
#   OUT      output directory (default bench/results/YYYY-MM-DD-HHMM-conns)
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=${CONFIG:-etc/ks-unsharded.yaml}
IDLE=${IDLE:-5000}
CYCLES=${CYCLES:-100000}
WORKERS=${WORKERS:-8}
OUT=${OUT:-bench/results/$(date +%Y-%m-%d-%H%M)-conns}
GO=${GO:-go}

die() { echo "conns.sh: $*" >&2; exit 1; }
cfg_get() { awk -v k="$1" '$1 == k":" {print $2; exit}' "$CONFIG"; }

addr=$(cfg_get addr)
web=$(cfg_get web_addr)
user=$(awk '/^user_list:/ {f=1} f && /user:/ {print $NF; exit}' "$CONFIG")
password=$(awk '/^user_list:/ {f=1} f && /password:/ {print $NF; exit}' "$CONFIG")
[[ -n $addr && -n $web && -n $user ]] || die "$CONFIG needs addr, web_addr and a user_list entry"

# One client fd and one proxy fd per connection, plus headroom.
need=$((IDLE + 1000))
if (($(ulimit -n) < need)); then
	ulimit -n "$need" 2>/dev/null || die "open files limit $(ulimit -n) < $need and cannot be raised (ulimit -Hn $(ulimit -Hn))"
fi

mkdir -p "$OUT" bin
bench/cluster.sh start >/dev/null
$GO build -o bin/proxy ./cmd/proxy
$GO build -o bin/conns ./bench/conns

bin/proxy -config "$CONFIG" -log-level warn >"$OUT/proxy.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	curl -fsS "http://$web/healthz" >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || die "proxy exited; see $OUT/proxy.log"
	sleep 0.1
done

{
	echo "# Client connections, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "Go $($GO env GOVERSION), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), kernel $(uname -r)."
	echo "Proxy: \`bin/proxy -config $CONFIG\`; frontend buffers: the config's \`frontend\` section (defaults in docs/configuration.md)."
	echo
	bin/conns -addr "$addr" -user "$user" -password "$password" -pid "$pid" -admin "http://$web" \
		-idle "$IDLE" -cycles "$CYCLES" -workers "$WORKERS"
} | tee "$OUT/conns.md"
