#!/usr/bin/env bash
# bench/hostile.sh: the proxy's resident memory under hostile clients
# (issue 32): compressed floods that stall, compressed clients reading
# large results, silent sockets, prepared-statement floods. bin/hostile
# starts its own MariaDB (internal/mariadbtest, a temporary directory) and
# a fresh bin/proxy per phase, and writes $OUT/hostile.md. About 2 minutes.
# Knobs:
#   EXTRA    YAML lines added to the proxy's configuration (e.g. "packet_memory_total: 67108864")
#   ARGS     more bin/hostile flags (-compressed 64 -readers 200 -silent 1000 -prepare 7x20000)
#   OUT      output directory (default bench/results/YYYY-MM-DD-HHMM-hostile)
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRA=${EXTRA:-}
ARGS=${ARGS:-}
OUT=${OUT:-bench/results/$(date +%Y-%m-%d-%H%M)-hostile}
GO=${GO:-go}

# 1000 silent sockets plus the floods: two descriptors each, and headroom.
if (($(ulimit -n) < 4096)); then
	ulimit -n 4096 2>/dev/null || echo "hostile.sh: open files limit $(ulimit -n); the silent-socket phase may stop short" >&2
fi
mkdir -p "$OUT" bin
$GO build -o bin/proxy ./cmd/proxy
$GO build -o bin/hostile ./bench/hostile
{
	echo "# Proxy memory under hostile clients, $(date -u +%Y-%m-%dT%H:%MZ)"
	echo
	echo "Go $($GO env GOVERSION), $(nproc) CPUs, kernel $(uname -r); commit $(git rev-parse --short HEAD)."
	echo
	# shellcheck disable=SC2086
	bin/hostile -proxy bin/proxy -config "$EXTRA" $ARGS
} | tee "$OUT/hostile.md"
