#!/usr/bin/env bash
# issue 13 point 5, final: direct, relay, p13before (5180431), head (1fd455f); text then prepared, 6 interleaved rounds,
# on a machine with nothing else running (the engineer only edits text meanwhile).
set -uo pipefail
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
DIR=/work/main/bench/results/2026-11-24-issue13-final2
W=/tmp/b15-head
B=/tmp/b14-bins
log "start; load: $(cat /proc/loadavg)"
( while true; do echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) | $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -6 | tr -s ' ' | tr '\n' ';')"; sleep 10; done ) > "$DIR/load-samples.txt" 2>&1 &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT
V="p13before=$DIR/ks-p13before.yaml@$B/proxy-5180431 head=$DIR/ks-head.yaml@$B/proxy-1fd455f"
OUT=$DIR TESTS=oltp_point_select MODES="disable auto" THREADS=16 DURATION=10 ROUNDS=${ROUNDS:-6} PATHS="direct relay" SHARDED_CONFIG= CLUSTER=1 PREPARE=1 \
	VARIANTS="$V" $W/bench/run14.sh > "$DIR/run-point-select.log" 2>&1
log "done, rc=$?; load: $(cat /proc/loadavg)"
$W/bench/cluster.sh stop > "$DIR/cluster-stop.log" 2>&1
log "end; load: $(cat /proc/loadavg)"
