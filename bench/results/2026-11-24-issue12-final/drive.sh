#!/usr/bin/env bash
set -uo pipefail
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
DIR=/work/main/bench/results/2026-11-24-issue12-final
for i in $(seq 1 18); do
	pgrep -f 'go-build.*\.test' >/dev/null || break
	sleep 10
done
log "start; load: $(cat /proc/loadavg); other test binaries: $(pgrep -fa 'go-build.*\.test' | cut -c1-100 | tr '\n' ';')"
( while true; do echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) | $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -6 | tr -s ' ' | tr '\n' ';')"; sleep 30; done ) > "$DIR/load-samples.txt" 2>&1 &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT
B=/tmp/m12-bins
V="before=$DIR/ks-unsharded-before.yaml@$B/proxy-before after=$DIR/ks-unsharded-after.yaml@$B/proxy-after before-sharded=$DIR/ks-before.yaml@$B/proxy-before after-sharded=$DIR/ks-after.yaml@$B/proxy-after"
OUT=$DIR TESTS=oltp_point_select MODES="disable auto" THREADS=16 DURATION=10 ROUNDS=8 PATHS="direct relay" SHARDED_CONFIG= CLUSTER=0 PREPARE=1 \
	VARIANTS="$V" /tmp/m12-after/bench/run.sh > "$DIR/run-point-select.log" 2>&1
log "point select done, rc=$?"
log "end; load: $(cat /proc/loadavg)"
