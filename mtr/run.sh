#!/usr/bin/env bash
# mtr/run.sh: MariaDB's own regression suite (mariadb-test-run --extern, suite main) against one MariaDB directly
# and against the same MariaDB version through the proxy with nothing sharded, then a comparison: every test that
# passes directly must pass through the proxy, except those listed in mtr/expected-<protocol>.txt.
#
#   mtr/run.sh                 the subset in mtr/subset.txt, text and binary (--ps-protocol) protocols (make test)
#   mtr/run.sh --full          the whole suite main, both protocols (make test-mtr)
#   mtr/run.sh --protocol ps   one protocol only (text or ps); other arguments are test names (main.select ...)
#
# Two servers are started from one freshly bootstrapped data directory under var/mtr (one for the direct run, one
# behind the proxy), with the settings mtr gives its own servers (include/default_mysqld.cnf: latin1, MyISAM,
# secure-file-priv ...), so the direct run and the proxy run start from the same state and run at the same time.
# Results, logs and the mtr var directories stay in var/mtr/<protocol>-<direct|proxy>/ for reading afterwards.
#
# Environment: SG_MTR_PORT (direct server, proxy's server, proxy, proxy admin use 4 ports from there; default: the
# first free block of 4 from 3340),
# MTR_TESTCASE_TIMEOUT=3 (minutes per test), MTR_VAR=var/mtr (where everything goes), MTR_DIR (default /usr/share/mysql/mysql-test, Debian's mariadb-test).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
MTR_DIR=${MTR_DIR:-/usr/share/mysql/mysql-test}
BASE=${SG_MTR_PORT:-}
TIMEOUT=${MTR_TESTCASE_TIMEOUT:-3}
VAR=${MTR_VAR:-$ROOT/var/mtr}

full=0
protocols=(text ps)
tests=()
while (($#)); do
	case $1 in
	--full) full=1 ;;
	--protocol)
		shift
		protocols=("$1")
		;;
	-h | --help)
		sed -n '2,16p' "$0"
		exit 0
		;;
	*) tests+=("$1") ;;
	esac
	shift
done
if ((!full && ${#tests[@]} == 0)); then
	mapfile -t tests < <(awk '!/^[[:space:]]*#/ && NF { print $1 }' mtr/subset.txt)
fi

die() {
	echo "mtr/run.sh: $*" >&2
	exit 1
}

scripts/deps.sh mariadb mtr
[[ -x $MTR_DIR/mtr ]] || die "$MTR_DIR/mtr not found (Debian package mariadb-test)"
MARIADBD=$(command -v mariadbd || echo /usr/sbin/mariadbd)
ROOT_FLAG=()
if [[ $(id -u) -eq 0 ]]; then
	ROOT_FLAG=(--user=root)
fi

# busy BASE: one of the 4 ports from BASE has a listener.
busy() {
	local port
	for port in "$1" $(($1 + 1)) $(($1 + 2)) $(($1 + 3)); do
		if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
	done
	return 1
}
if [[ -n $BASE ]]; then
	! busy "$BASE" || die "a port from $BASE to $((BASE + 3)) is in use (set SG_MTR_PORT)"
else
	# The first free block from 3340 (another run may hold one).
	for BASE in 3340 3350 3360 3370 3380 3390 3400 3410; do
		busy "$BASE" || break
	done
	! busy "$BASE" || die "no 4 free ports from 3340 to 3413 (set SG_MTR_PORT)"
fi

go build -o bin/proxy ./cmd/proxy

pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT

# A template data directory, bootstrapped once per run and copied for each server.
rm -rf "$VAR"
mkdir -p "$VAR/template"
mariadb-install-db --no-defaults --datadir="$VAR/template/var/mysqld.1/data" --auth-root-authentication-method=normal \
	"${ROOT_FLAG[@]}" >"$VAR/template/install.log" 2>&1 || {
	cat "$VAR/template/install.log" >&2
	die "mariadb-install-db failed"
}

# launch DIR PORT: mariadbd with mtr's settings on the data directory DIR/var/mysqld.1/data, inside the mtr var
# directory DIR/var (its secure-file-priv), as mtr lays them out: tests read ../../std_data from the data directory.
# CERT is the certificate's name in std_data (server: mtr's own; serversan: the same CA, with 127.0.0.1 as a
# subject alternative name, which the proxy's TLS to the server checks).
launch() {
	local dir=$1 port=$2 cert=${3:-server}
	mkdir -p "$dir/var/tmp" "$dir/var/log"
	cat >"$dir/my.cnf" <<EOF
[mysqld]
datadir=$dir/var/mysqld.1/data
tmpdir=$dir/var/tmp
socket=$dir/mysqld.sock
pid-file=$dir/mysqld.pid
log-error=$dir/error.log
port=$port
bind-address=127.0.0.1
secure-file-priv=$dir/var
plugin-maturity=unknown
local-infile
character-set-server=latin1
connect-timeout=60
log-basename=mysqld
log-bin-trust-function-creators=1
key_buffer_size=1M
sort_buffer_size=256K
max_heap_table_size=1M
loose-aria-pagecache-buffer-size=8M
innodb_buffer_pool_size=64M
innodb_log_file_size=10M
binlog-direct-non-transactional-updates
default-storage-engine=myisam
use_stat_tables=preferably
histogram_type=json_hb
max-connections=500
ssl-ca=$MTR_DIR/std_data/cacert.pem
ssl-cert=$MTR_DIR/std_data/$cert-cert.pem
ssl-key=$MTR_DIR/std_data/$cert-key.pem
EOF
	setsid "$MARIADBD" --defaults-file="$dir/my.cnf" "${ROOT_FLAG[@]}" >"$dir/console.log" 2>&1 &
	pids+=($!)
	wait_ping "$port" || {
		tail -20 "$dir/error.log" >&2
		die "the server in $dir on port $port did not start"
	}
}

wait_ping() {
	local i
	for ((i = 0; i < 120; i++)); do
		if mariadb-admin --no-defaults --protocol=tcp -h127.0.0.1 -P"$1" -uroot ping >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	return 1
}

# The template: what mtr's own bootstrap adds to a fresh data directory (time zones for tests, the test
# database in latin1, no anonymous users, and the mtr database with add_suppression and the check procedures).
make_template() {
	local sql=(mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"$BASE" -uroot) f
	launch "$VAR/template" "$BASE"
	"${sql[@]}" mysql </usr/share/mysql/mysql_test_data_timezone.sql
	"${sql[@]}" <<'EOF'
DROP DATABASE IF EXISTS test;
CREATE DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci;
ALTER TABLE mysql.gtid_slave_pos ENGINE=Aria transactional=0;
DELETE FROM mysql.global_priv WHERE user = '';
FLUSH PRIVILEGES;
CREATE DATABASE mtr CHARSET=latin1;
EOF
	# What mtr/mariadb-test-wrapper.sh puts back after every test.
	"${sql[@]}" <<'EOF'
CREATE TABLE mtr.sg_globals (name VARCHAR(64) PRIMARY KEY, value VARCHAR(2048)) ENGINE=Aria
  SELECT VARIABLE_NAME AS name, GLOBAL_VALUE AS value FROM information_schema.SYSTEM_VARIABLES
   WHERE READ_ONLY = 'NO' AND VARIABLE_SCOPE <> 'SESSION ONLY'
     AND VARIABLE_NAME NOT IN ('GTID_BINLOG_STATE', 'GTID_SLAVE_POS', 'GTID_CURRENT_POS', 'DEBUG', 'DEBUG_DBUG',
                               'LOG_BIN_BASENAME', 'TIMESTAMP', 'RAND_SEED1', 'RAND_SEED2', 'INSERT_ID',
                               'LAST_INSERT_ID', 'IDENTITY', 'PSEUDO_THREAD_ID');
CREATE TABLE mtr.sg_databases (name VARCHAR(64) PRIMARY KEY) ENGINE=Aria SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA;
CREATE TABLE mtr.sg_users (user VARCHAR(128), host VARCHAR(255)) ENGINE=Aria SELECT User AS user, Host AS host FROM mysql.global_priv;
EOF
	for f in mtr_warnings.sql mtr_check.sql; do
		sed -e 's/^delimiter ||;$/delimiter ||/' -e '/^[[:space:]]*--/d' "$MTR_DIR/include/$f" | "${sql[@]}" mtr
	done
	mariadb-admin --no-defaults --protocol=tcp -h127.0.0.1 -P"$BASE" -uroot shutdown
	wait "${pids[-1]}" || true
	pids=()
}

# start_server NAME PORT [CERT]: a copy of the template in $VAR/NAME.
start_server() {
	local dir=$VAR/$1
	rm -rf "$dir"
	mkdir -p "$dir"
	mkdir -p "$dir/var/mysqld.1"
	cp -a "$VAR/template/var/mysqld.1/data" "$dir/var/mysqld.1/data"
	launch "$dir" "$2" "${3:-server}"
}

start_proxy() {
	cat >"$VAR/ks.yaml" <<EOF
# mtr/run.sh: one MariaDB behind the proxy, nothing sharded; mtr logs in as root without a password, and
# the backend account is root too (tests show it as the definer of views and routines); every kind of statement is
# allowed, as for an operator's proxy.
addr: 127.0.0.1:$((BASE + 2))
socket: $VAR/proxy.sock
web_addr: 127.0.0.1:$((BASE + 3))
log_path: $VAR/proxy
log_level: info
user_list:
  - user: root
    password: ""
nodes:
  - name: node1
    master: 127.0.0.1:$((BASE + 1))
    user: root
    password: ""
    max_conns_limit: 128
    # TLS to the server, as a client of MariaDB directly would have it (tests read the session's Ssl_* status).
    tls: true
    tls_ca: $MTR_DIR/std_data/cacert.pem
deny_statements: []
# TLS for clients with mtr's own certificates, as its servers have (tests connect with --ssl and the std_data CA).
tls_cert: $MTR_DIR/std_data/server-cert.pem
tls_key: $MTR_DIR/std_data/server-key.pem
# The accounts tests create log in with their own MariaDB accounts.
backend_logins: root
# Idle pooled connections close at once: tests count the server's sessions (include/count_sessions.inc).
backend:
  idle_timeout: 50ms
  health_interval: 200ms
schema_list:
  - user: root
    nodes: [node1]
    default: node1
EOF
	mkdir -p "$VAR/proxy"
	bin/proxy -config "$VAR/ks.yaml" >"$VAR/proxy/console.log" 2>&1 &
	pids+=($!)
	wait_ping $((BASE + 2)) && return 0
	tail -20 "$VAR/proxy/console.log" >&2
	die "the proxy did not start"
}

# run_mtr NAME PORT SOCKET PROTOCOL: mtr against 127.0.0.1:PORT and, for "localhost", SOCKET; its output goes to $VAR/PROTOCOL-NAME.log and the
# test names with their results ("main.x pass") to $VAR/PROTOCOL-NAME.results.
run_mtr() {
	local name=$1 port=$2 socket=$3 protocol=$4 dir=$VAR/$1 log=$VAR/$4-$1.log args=()
	[[ $protocol == ps ]] && args+=(--ps-protocol)
	# Ports mtr reserves for itself: one block per run, apart from other runs' (SG_MTR_PORT).
	local thread=$((200 + BASE % 100)) server=$port
	[[ $name == direct ]] || thread=$((thread + 100)) server=$((BASE + 1))
	if ((full)); then
		args+=(--suite=main)
	else
		args+=("${tests[@]}")
	fi
	(cd "$MTR_DIR" && MYSQL_TEST=$ROOT/mtr/mariadb-test-wrapper.sh MTR_REAL_TEST=$(command -v mariadb-test) \
		MTR_CLEAN_PORT=$port MTR_SERVER_PORT=$server MTR_BROKEN=$VAR/$protocol-$name.broken MTR_BUILD_THREAD=$thread ./mtr --skip-test-list="$VAR/skip.txt" --extern host=127.0.0.1 --extern port="$port" --extern user=root --extern socket="$socket" \
		--vardir="$dir/var" --force --max-test-fail=0 --testcase-timeout="$TIMEOUT" --retry=0 \
		"${args[@]}") >"$log" 2>&1 || true
	awk '$2 == "[" && $4 == "]" { print $1, $3 }' "$log" | sort -u >"$VAR/$protocol-$name.results"
}

# Tests that need server options of their own (.opt, -master.opt, .cnf files) cannot have them on a running server
# (mtr --extern would run them with the wrong ones): they are skipped.
for f in "$MTR_DIR"/main/*.opt "$MTR_DIR"/main/*.cnf; do
	name=${f##*/}
	name=${name%.*}
	echo "main.${name%-master} : needs server options of its own"
done | grep -v -- '-slave :' >"$VAR/skip.txt"
# Tests that stop, restart or crash the server would take it away from the rest of the run.
grep -l -E 'restart_mysqld|shutdown_mysqld|kill_mysqld|start_mysqld|restart_abort|crash_mysqld|wait_until_disconnected|^[[:space:]]*shutdown[[:space:]]*;|shutdown_server|expect_crash|mysqld\.1\.expect' \
	"$MTR_DIR"/main/*.test | sed 's|.*/\(.*\)\.test$|main.\1 : restarts the server|' >>"$VAR/skip.txt"
# Tests that rewrite the privilege tables lock every account out when they fail half way.
# (main.upgrade_MDEV-19650 drops root itself and puts it back only at its end.)
grep -l -i -E "truncate (table )?mysql\.(global_priv|user)\b|switch_to_mysql_user|(drop|rename|alter) table (if exists )?mysql\.(user|global_priv)\b|drop user +'?root'?@" \
	"$MTR_DIR"/main/*.test | sed 's|.*/\(.*\)\.test$|main.\1 : rewrites the privilege tables|' >>"$VAR/skip.txt"
sort -u -o "$VAR/skip.txt" "$VAR/skip.txt"

make_template
status=0
for protocol in "${protocols[@]}"; do
	# Fresh servers for each protocol: a test that fails leaves its tables behind.
	start=$SECONDS
	cleanup
	pids=()
	start_server direct "$BASE"
	start_server proxied $((BASE + 1)) serversan
	start_proxy
	run_mtr direct "$BASE" "$VAR/direct/mysqld.sock" "$protocol" &
	direct_pid=$!
	run_mtr proxied $((BASE + 2)) "$VAR/proxy.sock" "$protocol"
	wait "$direct_pid"
	d=$VAR/$protocol-direct.results
	p=$VAR/$protocol-proxied.results
	expected=mtr/expected-$protocol.txt
	[[ -f $expected ]] || : >"$expected"
	awk '$2 == "pass" { print $1 }' "$d" | sort >"$VAR/$protocol-direct.pass"
	awk '$2 == "pass" { print $1 }' "$p" | sort >"$VAR/$protocol-proxied.pass"
	awk '!/^[[:space:]]*#/ && NF { print $1 }' "$expected" | sort >"$VAR/$protocol-expected"
	comm -23 "$VAR/$protocol-direct.pass" "$VAR/$protocol-proxied.pass" >"$VAR/$protocol-lost"
	comm -23 "$VAR/$protocol-lost" "$VAR/$protocol-expected" >"$VAR/$protocol-unexpected"
	comm -12 "$VAR/$protocol-expected" "$VAR/$protocol-proxied.pass" >"$VAR/$protocol-stale"
	echo "mtr $protocol: directly $(wc -l <"$VAR/$protocol-direct.pass") pass, through the proxy" \
		"$(wc -l <"$VAR/$protocol-proxied.pass") pass; $(wc -l <"$VAR/$protocol-lost") pass directly only" \
		"($(wc -l <"$VAR/$protocol-expected") expected in $expected); $((SECONDS - start)) s"
	if [[ -s $VAR/$protocol-unexpected ]]; then
		echo "mtr $protocol: FAIL: these pass directly but not through the proxy (logs: $VAR/proxied/var/log/):" >&2
		sed 's/^/  /' "$VAR/$protocol-unexpected" >&2
		status=1
	fi
	for name in direct proxied; do
		if [[ -s $VAR/$protocol-$name.broken ]]; then
			echo "mtr $protocol: FAIL: root could not log in to the $name server after: $(sort -u "$VAR/$protocol-$name.broken" | head -3 | tr '\n' ' ')" >&2
			status=1
		fi
	done
	if [[ -s $VAR/$protocol-stale ]]; then
		echo "mtr $protocol: listed in $expected but passing through the proxy now (remove them):" >&2
		sed 's/^/  /' "$VAR/$protocol-stale" >&2
	fi
	if (($(wc -l <"$VAR/$protocol-direct.pass") == 0)); then
		echo "mtr $protocol: FAIL: nothing passed directly; see $VAR/$protocol-direct.log" >&2
		status=1
	fi
done
exit $status
