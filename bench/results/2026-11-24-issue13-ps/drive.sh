#!/usr/bin/env bash
# issue 13 prepared-statement re-measure: direct, relay, p13before (5180431), prev (cd5ff00), head (ea2e672),
# head-tls (ea2e672 + tls_cert/tls_key, sysbench --mysql-ssl=on).
# Pass 1: text then prepared, 8 rounds, paths in that order. Pass 2: prepared only, 6 rounds, order reversed (REVERSE=1).
# Then one 20 s prepared run each on head and p13before with a 15 s CPU profile from the proxy's web_addr.
set -uo pipefail
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
DIR=/work/main/bench/results/2026-11-24-issue13-ps
W=/tmp/b14-ea2e672
B=/tmp/b14-bins
# sysbench 1.0.20 --mysql-ssl=on loads client-key.pem, client-cert.pem, cacert.pem from its working directory (run.sh cds to the worktree root)
cp $DIR/cert/client-key.pem $DIR/cert/client-cert.pem $W/; cp $DIR/cert/ca.pem $W/cacert.pem
log "start; load: $(cat /proc/loadavg)"
( while true; do echo "$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) | $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -6 | tr -s ' ' | tr '\n' ';')"; sleep 30; done ) > "$DIR/load-samples.txt" 2>&1 &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT
V="p13before=$DIR/ks-p13before.yaml@$B/proxy-5180431 prev=$DIR/ks-prev.yaml@$B/proxy-cd5ff00 head=$DIR/ks-head.yaml@$B/proxy-ea2e672 head-tls=$DIR/ks-head-tls.yaml@$B/proxy-ea2e672"
OUT=$DIR TESTS=oltp_point_select MODES="disable auto" THREADS=16 DURATION=10 ROUNDS=${ROUNDS:-8} PATHS="direct relay" SHARDED_CONFIG= CLUSTER=1 PREPARE=1 \
	TLS_PATHS="head-tls" VARIANTS="$V" $W/bench/run14.sh > "$DIR/run-point-select.log" 2>&1
log "pass 1 (text, prepared) done, rc=$?; load: $(cat /proc/loadavg)"
OUT=$DIR/reversed TESTS=oltp_point_select MODES="auto" THREADS=16 DURATION=10 ROUNDS=${ROUNDS2:-6} PATHS="direct relay" SHARDED_CONFIG= CLUSTER=1 PREPARE=0 \
	REVERSE=1 TLS_PATHS="head-tls" VARIANTS="$V" $W/bench/run14.sh > "$DIR/run-point-select-reversed.log" 2>&1
log "pass 2 (prepared, reversed) done, rc=$?; load: $(cat /proc/loadavg)"

# Profiles: the proxy alone on its port, sysbench prepared 16 threads 20 s, profile seconds 3..18.
prof() { # NAME BINARY CONFIG PORT WEBPORT
	local name=$1 bin=$2 cfg=$3 port=$4 web=$5 pid sb
	$bin -config $cfg -log-level warn > "$DIR/prof-$name.log" 2>&1 &
	pid=$!
	for i in $(seq 50); do ss -Hltn "sport = :$port" | grep -q . && break; sleep 0.1; done
	(cd $W && sysbench oltp_point_select --db-driver=mysql --mysql-user=shardgate --mysql-password=shardgate --mysql-db=sbtest \
		--tables=1 --table-size=10000 --mysql-host=127.0.0.1 --mysql-port=$port --time=20 --threads=16 --db-ps-mode=auto \
		--report-interval=0 --percentile=95 --rand-type=uniform --skip-trx=off run > "$DIR/prof-$name-sysbench.txt" 2>&1) &
	sb=$!
	sleep 3
	curl -fsS --max-time 30 -o "$DIR/cpu-$name-prepared.pb.gz" "http://127.0.0.1:$web/debug/pprof/profile?seconds=15" || log "profile $name failed"
	wait $sb
	kill $pid; wait $pid 2>/dev/null
	go tool pprof -top -nodecount=40 $bin "$DIR/cpu-$name-prepared.pb.gz" > "$DIR/cpu-$name-prepared.txt" 2>&1
	log "profile $name: $(grep -E '^ *queries:' "$DIR/prof-$name-sysbench.txt" | tr -s ' ')"
}
prof head $B/proxy-ea2e672 $DIR/ks-head.yaml 9673 9773
prof p13before $B/proxy-5180431 $DIR/ks-p13before.yaml 9671 9771
log "stopping the cluster"
$W/bench/cluster.sh stop > "$DIR/cluster-stop.log" 2>&1
log "end; load: $(cat /proc/loadavg)"
