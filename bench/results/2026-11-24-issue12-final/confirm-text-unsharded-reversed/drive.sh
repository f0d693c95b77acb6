#!/usr/bin/env bash
set -uo pipefail
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
log "start; load: $(cat /proc/loadavg)"
( while true; do echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) | $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -6 | tr -s ' ' | tr '\n' ';')"; sleep 30; done ) > "/work/main/bench/results/2026-11-24-issue12-final/confirm-text-unsharded-reversed/load-samples.txt" 2>&1 &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT
B=/tmp/m12-bins
V="after=/work/main/bench/results/2026-11-24-issue12-final/ks-unsharded-after.yaml@$B/proxy-after before=/work/main/bench/results/2026-11-24-issue12-final/ks-unsharded-before.yaml@$B/proxy-before"
OUT=/work/main/bench/results/2026-11-24-issue12-final/confirm-text-unsharded-reversed TESTS=oltp_point_select MODES=disable THREADS=16 DURATION=10 ROUNDS=8 PATHS="direct relay" SHARDED_CONFIG= CLUSTER=0 PREPARE=0 	VARIANTS="$V" /tmp/m12-after/bench/run.sh > "/work/main/bench/results/2026-11-24-issue12-final/confirm-text-unsharded-reversed/run.log" 2>&1
log "done, rc=$?; load: $(cat /proc/loadavg)"
