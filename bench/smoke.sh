#!/usr/bin/env bash
# End-to-end smoke test, run by `make test`: real MariaDB servers, the real proxy binary, the real mariadb
# client and sysbench.
#
# It starts its own two MariaDB servers (bench/cluster.sh with PORTS="13307 13308", data under var/smoke/,
# wiped on every run), writes a copy of etc/ks.yaml pointing at them with the proxy on 127.0.0.1:19696 and the
# admin listener on 127.0.0.1:19797, builds and starts bin/proxy, and drives it with the mariadb client and
# sysbench. On any failure it prints the tail of the proxy log (kept at var/smoke/proxy.log) and exits 1. The
# proxy and the smoke MariaDB servers are always stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

export PORTS="13307 13308"
export VARDIR="$ROOT/var/smoke"
export SG_USER=shardgate SG_PASSWORD=shardgate
PROXY_ADDR=127.0.0.1:19696
WEB_ADDR=127.0.0.1:19797
PROXY_LOG="$VARDIR/proxy.log"
START_TIMEOUT=30 # seconds for the proxy to listen
STOP_TIMEOUT=20  # seconds for the proxy to exit after SIGTERM

TMP=$(mktemp -d)
PROXY_PID=
STEP="setup"

log() { echo "smoke: $*"; }

fail() {
	echo "smoke: FAIL in step '$STEP': $*" >&2
	exit 1
}

on_exit() {
	rm -rf "$TMP"
	(($1 != 0)) || log "PASS"
}
HARNESS=smoke LOG_TAIL=60
source scripts/harness.sh # stops the proxy and the servers on exit

command -v sysbench >/dev/null || fail "sysbench is not installed (scripts/deps.sh sysbench)"
command -v mariadb >/dev/null || fail "the mariadb client is not installed (scripts/deps.sh mariadb)"

# sql [client options...] QUERY: run QUERY through the proxy, tab-separated rows without a header.
sql() {
	local query=${*: -1}
	mariadb --no-defaults --skip-ssl --protocol=tcp -h"${PROXY_ADDR%:*}" -P"${PROXY_ADDR#*:}" \
		-u"$SG_USER" -p"$SG_PASSWORD" --connect-timeout=10 --batch --skip-column-names \
		"${@:1:$#-1}" -e "$query"
}

# expect WANT [client options...] QUERY: fail unless the query's output is exactly WANT.
expect() {
	local want=$1 got
	shift
	got=$(sql "$@") || fail "query failed: ${*: -1}"
	[[ $got == "$want" ]] || fail "query: ${*: -1}
want:
$want
got:
$got"
}

# http_get URL: print the body; fail on a non-2xx status. Uses curl when present, else bash's /dev/tcp.
http_get() {
	if command -v curl >/dev/null; then
		curl -fsS --max-time 10 "$1"
		return
	fi
	local hostport=${1#http://}
	local path=/${hostport#*/}
	hostport=${hostport%%/*}
	exec 3<>"/dev/tcp/${hostport%:*}/${hostport#*:}"
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" >&3
	local status
	IFS= read -r status <&3
	[[ $status =~ ^HTTP/1\.[01]\ 2[0-9][0-9] ]] || {
		exec 3<&-
		echo "http_get $1: $status" >&2
		return 1
	}
	sed '1,/^\r\{0,1\}$/d' <&3
	exec 3<&-
}

STEP="mariadb"
bench/cluster.sh stop >/dev/null # a previous run that was killed hard may have left them running
rm -rf "$VARDIR"
bench/cluster.sh start

STEP="config"
sed -e "s/^addr:.*/addr: $PROXY_ADDR/" \
	-e "s/^web_addr:.*/web_addr: $WEB_ADDR/" \
	-e 's/^prometheus_addr:.*/prometheus_addr: ""/' \
	-e 's/127\.0\.0\.1:3307\b/127.0.0.1:13307/g' \
	-e 's/127\.0\.0\.1:3308\b/127.0.0.1:13308/g' \
	etc/ks.yaml >"$TMP/ks.yaml"
# The scatter step's table: sbtest.big, hash-sharded on id into 8 subtables, 4 per node.
awk '{ print } /^        locations: \[2, 2\]$/ && !done { done = 1
	print "      - db: sbtest"; print "        table: big"; print "        key: id"; print "        type: hash"
	print "        nodes: [node1, node2]"; print "        locations: [4, 4]" }' "$TMP/ks.yaml" >"$TMP/ks2.yaml"
mv "$TMP/ks2.yaml" "$TMP/ks.yaml"
grep -q "table: big" "$TMP/ks.yaml" || fail "etc/ks.yaml changed shape: could not add the scatter table's rule"
for want in "addr: $PROXY_ADDR" "web_addr: $WEB_ADDR" "127.0.0.1:13307" "127.0.0.1:13308"; do
	grep -qF "$want" "$TMP/ks.yaml" || fail "etc/ks.yaml changed shape: could not set '$want' in the smoke config"
done
if grep -qE '127\.0\.0\.1:330[78]\b' "$TMP/ks.yaml"; then
	fail "the smoke config still points at the development servers on 3307/3308"
fi

STEP="build"
go build -o bin/proxy ./cmd/proxy

STEP="start proxy"
bin/proxy -config "$TMP/ks.yaml" -log-level info >"$PROXY_LOG" 2>&1 &
PROXY_PID=$!
deadline=$((SECONDS + START_TIMEOUT))
until (exec 3<>"/dev/tcp/${PROXY_ADDR%:*}/${PROXY_ADDR#*:}") 2>/dev/null; do
	kill -0 "$PROXY_PID" 2>/dev/null || fail "bin/proxy exited during startup"
	((SECONDS < deadline)) || fail "bin/proxy not listening on $PROXY_ADDR after ${START_TIMEOUT}s"
	sleep 0.1 # polling interval
done
log "proxy up on $PROXY_ADDR (pid $PROXY_PID)"

STEP="ddl"
sql "DROP DATABASE IF EXISTS smoke; CREATE DATABASE smoke" >/dev/null || fail "CREATE DATABASE"
sql "CREATE TABLE smoke.t (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL)" || fail "CREATE TABLE"

STEP="insert/select"
sql "INSERT INTO smoke.t VALUES (1, 'a'), (2, 'b'), (3, 'c')" || fail "INSERT"
expect $'1\ta\n2\tb\n3\tc' "SELECT id, name FROM smoke.t ORDER BY id"

STEP="update"
sql "UPDATE smoke.t SET name = 'bb' WHERE id = 2" || fail "UPDATE"
expect "bb" "SELECT name FROM smoke.t WHERE id = 2"

STEP="delete"
sql "DELETE FROM smoke.t WHERE id = 3" || fail "DELETE"
expect "2" "SELECT COUNT(*) FROM smoke.t"

STEP="transaction"
# Inside the transaction the row is visible; after ROLLBACK it is gone. Then a committed one stays.
expect $'1\n0' "BEGIN; INSERT INTO smoke.t VALUES (10, 'x'); SELECT COUNT(*) FROM smoke.t WHERE id = 10;
	ROLLBACK; SELECT COUNT(*) FROM smoke.t WHERE id = 10"
expect "0" "SELECT COUNT(*) FROM smoke.t WHERE id = 10"
expect "1" "START TRANSACTION; INSERT INTO smoke.t VALUES (11, 'y'); COMMIT; SELECT COUNT(*) FROM smoke.t WHERE id = 11"
sql "DELETE FROM smoke.t WHERE id = 11" || fail "DELETE"

STEP="show databases"
dbs=$(sql "SHOW DATABASES") || fail "SHOW DATABASES"
grep -qx smoke <<<"$dbs" || fail "SHOW DATABASES lacks smoke: $dbs"

STEP="use"
expect $'smoke\t2' "USE smoke; SELECT DATABASE(), COUNT(*) FROM t"
expect $'smoke\t2' smoke "SELECT DATABASE(), COUNT(*) FROM t" # database in the handshake

STEP="load data local infile"
printf '100\tl100\n101\tl101\n102\tl102\n' >"$TMP/rows.tsv"
sql --local-infile=1 smoke "LOAD DATA LOCAL INFILE '$TMP/rows.tsv' INTO TABLE t" || fail "LOAD DATA LOCAL INFILE"
expect $'100\tl100\n101\tl101\n102\tl102' "SELECT id, name FROM smoke.t WHERE id >= 100 ORDER BY id"

STEP="compress"
want=$'1\ta\n2\tbb\n100\tl100\n101\tl101\n102\tl102'
expect "$want" "SELECT id, name FROM smoke.t ORDER BY id"
expect "$want" --compress "SELECT id, name FROM smoke.t ORDER BY id"

STEP="healthz"
http_get "http://$WEB_ADDR/healthz" >/dev/null || fail "GET http://$WEB_ADDR/healthz"

STEP="drop"
sql "DROP DATABASE smoke" || fail "DROP DATABASE"

# sb_check LOG: fail unless a sysbench run's output shows zero errors and reconnects.
# "ignored errors" are the deadlocks and lock-wait timeouts (1213, 1020, 1205) that MariaDB itself raises under
# oltp_read_write's contention, directly as through the proxy; sysbench retries them. Real errors (sysbench stops
# with FATAL) and reconnects fail.
sb_check() {
	local log=$1 n
	grep -E 'queries:|ignored errors:|reconnects:|95th' "$log" | sed 's/^ */smoke: sysbench: /'
	n=$(awk -F: '$1 ~ /^ *reconnects$/ { split($2, f, " "); print f[1] }' "$log")
	[[ -n $n ]] || fail "no 'reconnects' line in the sysbench output"
	[[ $n == 0 ]] || fail "sysbench reported $n reconnects"
	# A plain "errors:" counter (other sysbench versions) must be zero too.
	n=$(awk -F: '$1 ~ /^ *errors$/ { split($2, f, " "); print f[1] }' "$log")
	[[ -z $n || $n == 0 ]] || fail "sysbench reported $n errors"
	if grep -q FATAL "$log"; then
		grep -m5 FATAL "$log" >&2
		fail "sysbench printed FATAL"
	fi
}

# sb_run NAME ARGS...: run sysbench, keep its output in $TMP/NAME.log, fail on errors.
sb_run() {
	local name=$1
	shift
	if ! sysbench "$@" >"$TMP/$name.log" 2>&1; then
		tail -n 20 "$TMP/$name.log" >&2
		fail "sysbench $name exited non-zero"
	fi
	if [[ ${*: -1} == run ]]; then
		sb_check "$TMP/$name.log"
	elif grep -q FATAL "$TMP/$name.log"; then
		grep -m5 FATAL "$TMP/$name.log" >&2
		fail "sysbench $name printed FATAL"
	fi
}

# --rand-type=uniform: sysbench's default skewed distribution makes a few rows hot, and oltp_read_write then
# deadlocks now and then even without a proxy; uniform makes that rare.
SB_CONN=(--mysql-host="${PROXY_ADDR%:*}" --mysql-port="${PROXY_ADDR#*:}" --mysql-user="$SG_USER"
	--mysql-password="$SG_PASSWORD" --tables=1 --rand-type=uniform)

# Unsharded: database sbplain has no shard rules, so every statement goes to the default node. oltp_read_write
# in its default mode (prepared statements, BEGIN/COMMIT), then over the text protocol.
STEP="sysbench unsharded"
sql "DROP DATABASE IF EXISTS sbplain; CREATE DATABASE sbplain" >/dev/null || fail "CREATE DATABASE sbplain"
PLAIN=("${SB_CONN[@]}" --mysql-db=sbplain --table-size=1000)
sb_run plain-prepare oltp_read_write "${PLAIN[@]}" prepare
sb_run plain-rw-ps oltp_read_write "${PLAIN[@]}" --time=8 --threads=4 run
sb_run plain-rw-text oltp_read_write "${PLAIN[@]}" --time=5 --threads=4 --db-ps-mode=disable run
sb_run plain-cleanup oltp_read_write "${PLAIN[@]}" cleanup
sql "DROP DATABASE sbplain" || fail "DROP DATABASE sbplain"

# direct PORT QUERY: run QUERY on one smoke MariaDB server, bypassing the proxy.
direct() {
	mariadb --no-defaults --skip-ssl --protocol=tcp -h127.0.0.1 -P"$1" -u"$SG_USER" -p"$SG_PASSWORD" \
		--batch --skip-column-names sbtest -e "$2"
}

# Sharded: etc/ks.yaml shards sbtest.sbtest1 by hash on id over subtables sbtest1_0000..0003 (two per node).
# sysbench creates and loads it through the proxy; then every row must be in subtable id mod 4 on its node.
STEP="sysbench sharded prepare"
sql "CREATE DATABASE IF NOT EXISTS sbtest" || fail "CREATE DATABASE sbtest"
SHARD=("${SB_CONN[@]}" --mysql-db=sbtest --table-size=2000 --auto-inc=off)
sysbench oltp_point_select "${SHARD[@]}" cleanup >/dev/null 2>&1 || true
sb_run shard-prepare oltp_point_select "${SHARD[@]}" prepare
STEP="sharded placement"
total=0
for i in 0 1 2 3; do
	port=13307
	((i < 2)) || port=13308
	other=$((port == 13307 ? 13308 : 13307))
	got=$(direct "$port" "SELECT COUNT(*), COALESCE(SUM(id % 4 <> $i), 0) FROM sbtest1_000$i") ||
		fail "subtable sbtest1_000$i missing on 127.0.0.1:$port"
	read -r n misplaced <<<"$got"
	((n > 0 && misplaced == 0)) || fail "sbtest1_000$i on :$port holds $n rows, $misplaced not id mod 4 = $i"
	if direct "$other" "SELECT 1 FROM sbtest1_000$i LIMIT 1" >/dev/null 2>&1; then
		fail "sbtest1_000$i exists on :$other too"
	fi
	total=$((total + n))
done
((total == 2000)) || fail "the subtables hold $total rows, want 2000"
direct 13307 "SELECT 1 FROM sbtest1 LIMIT 1" >/dev/null 2>&1 && fail "a physical table named sbtest1 exists"
n=$(sql "SELECT id FROM sbtest.sbtest1" | wc -l) || fail "scatter SELECT"
((n == 2000)) || fail "a scatter SELECT through the proxy returned $n rows, want 2000"
log "sbtest1: 2000 rows in 4 subtables, each row in subtable id mod 4"

# Single-shard statements over the text protocol, without transactions.
STEP="sysbench sharded run"
# oltp_insert with --auto-inc=off draws ids from sysbench.rand.unique(), which
# now and then lands on one of the prepared rows: that duplicate key is the
# server's right answer, not a proxy error.
for test in oltp_point_select oltp_insert oltp_update_index oltp_update_non_index oltp_delete; do
	ignore=()
	[[ $test == oltp_insert ]] && ignore=(--mysql-ignore-errors=1062)
	sb_run "shard-$test" "$test" "${SHARD[@]}" "${ignore[@]}" --skip-trx=on --db-ps-mode=disable --time=3 --threads=4 run
done
sb_run shard-cleanup oltp_point_select "${SHARD[@]}" cleanup

STEP="streaming"
# A 256 MB result must stream through the proxy without being held in memory.
bytes=$(sql --quick sbtest "SELECT REPEAT('x', 1024) FROM seq_1_to_262144" | wc -c) || fail "streaming query"
((bytes > 268435456)) || fail "streamed only $bytes bytes"
hwm_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$PROXY_PID/status")
log "streamed $bytes bytes; proxy peak RSS ${hwm_kb} kB"
((hwm_kb < 102400)) || fail "proxy peak RSS ${hwm_kb} kB exceeds 100 MB while streaming"

STEP="scatter"
# One million rows in 8 subtables over 2 nodes, loaded directly on the servers (id mod 8 = subtable).
sql sbtest "CREATE TABLE big (id BIGINT PRIMARY KEY, k INT NOT NULL)" || fail "CREATE TABLE big"
for i in 0 1 2 3 4 5 6 7; do
	port=13307
	((i < 4)) || port=13308
	direct "$port" "INSERT INTO big_000$i SELECT seq, (seq * 7919) % 1000003 FROM seq_0_to_999999 WHERE seq % 8 = $i" ||
		fail "loading big_000$i"
done
# The 10 smallest (k, id) pairs, computed on each node and merged here, must be what the proxy answers.
want=$(for port in 13307 13308; do
	first=0
	((port == 13307)) || first=4
	direct "$port" "SELECT id, k FROM (SELECT * FROM big_000$first UNION ALL SELECT * FROM big_000$((first + 1))
		UNION ALL SELECT * FROM big_000$((first + 2)) UNION ALL SELECT * FROM big_000$((first + 3))) t ORDER BY k, id LIMIT 10"
done | sort -t$'\t' -k2,2n -k1,1n | head -n 10)
expect "$want" sbtest "SELECT id, k FROM big ORDER BY k, id LIMIT 10"
expect 1000000 sbtest "SELECT COUNT(*) FROM big"
# A 1 GB unordered result gathered from all 8 subtables streams through without being held.
bytes=$(sql --quick sbtest "SELECT id, REPEAT('s', 1000) FROM big" | wc -c) || fail "scatter streaming query"
((bytes > 1000000000)) || fail "the scatter query streamed only $bytes bytes"
hwm_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$PROXY_PID/status")
log "ORDER BY k LIMIT 10 over 1M rows in 8 subtables; scattered $bytes bytes; proxy peak RSS ${hwm_kb} kB"
((hwm_kb < 102400)) || fail "proxy peak RSS ${hwm_kb} kB exceeds 100 MB in the scatter step"
sql sbtest "DROP TABLE big" || fail "DROP TABLE big"

STEP="kill query"
# KILL QUERY takes the proxy's own connection id (what the client shows and
# what SHOW PROCESSLIST on the proxy lists).
sql "SELECT SLEEP(30)" >"$TMP/sleep.out" 2>&1 &
sleeper=$!
victim=
deadline=$((SECONDS + 10))
until [[ -n $victim ]]; do
	((SECONDS < deadline)) || fail "the SLEEP(30) session never showed up in SHOW PROCESSLIST"
	victim=$(sql "SHOW PROCESSLIST" | awk -F'\t' '$8 ~ /SLEEP\(30\)/ { print $1 }')
	[[ -n $victim ]] || sleep 0.1 # polling interval
done
started=$SECONDS
sql "KILL QUERY $victim" || fail "KILL QUERY $victim"
wait "$sleeper" || true
((SECONDS - started < 10)) || fail "KILL QUERY took $((SECONDS - started))s"
grep -q "1317" "$TMP/sleep.out" || fail "the killed statement did not end with error 1317: $(cat "$TMP/sleep.out")"
log "KILL QUERY $victim interrupted SELECT SLEEP(30)"

STEP="shutdown"
kill -TERM "$PROXY_PID"
deadline=$((SECONDS + STOP_TIMEOUT))
while kill -0 "$PROXY_PID" 2>/dev/null; do
	((SECONDS < deadline)) || fail "bin/proxy still running ${STOP_TIMEOUT}s after SIGTERM"
	sleep 0.1 # polling interval
done
rc=0
wait "$PROXY_PID" || rc=$?
PROXY_PID=
((rc == 0)) || fail "bin/proxy exited with status $rc after SIGTERM"
