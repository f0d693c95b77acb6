#!/usr/bin/env bash
# issue 13 point-select run: direct, relay, p12before (9938041), p13before (5180431), head (cd5ff00), head-tls (cd5ff00 + tls_cert/tls_key, sysbench --mysql-ssl=on)
set -uo pipefail
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
DIR=/work/main/bench/results/2026-11-24-issue13-final
W=/tmp/b13-cd5ff00
B=/tmp/b13-bins
# sysbench 1.0.20 --mysql-ssl=on loads client-key.pem, client-cert.pem, cacert.pem from its working directory (run.sh cds to the worktree root)
cp $DIR/cert/client-key.pem $DIR/cert/client-cert.pem $W/; cp $DIR/cert/ca.pem $W/cacert.pem
log "start; load: $(cat /proc/loadavg)"
( while true; do echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) | $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -6 | tr -s ' ' | tr '\n' ';')"; sleep 30; done ) > "$DIR/load-samples.txt" 2>&1 &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT
V="p12before=$DIR/ks-p12before.yaml@$B/proxy-9938041 p13before=$DIR/ks-p13before.yaml@$B/proxy-5180431 head=$DIR/ks-head.yaml@$B/proxy-cd5ff00 head-tls=$DIR/ks-head-tls.yaml@$B/proxy-cd5ff00"
OUT=$DIR TESTS=oltp_point_select MODES="disable auto" THREADS=16 DURATION=10 ROUNDS=${ROUNDS:-8} PATHS="direct relay" SHARDED_CONFIG= CLUSTER=1 PREPARE=1 \
	TLS_PATHS="head-tls" VARIANTS="$V" $W/bench/run13.sh > "$DIR/run-point-select.log" 2>&1
log "point select done, rc=$?"
log "end; load: $(cat /proc/loadavg)"
