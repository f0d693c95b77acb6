#!/usr/bin/env bash
# Local MariaDB servers for `make run`, `make bench`, bench/smoke.sh and people.
#
#   bench/cluster.sh start    start every server (idempotent), wait until each accepts TCP connections
#   bench/cluster.sh start --replicas
#                             also start REPLICA_PORTS as GTID replicas of the first of PORTS (for rw_split;
#                             they replicate from the master's first binary log, so start from fresh data
#                             directories: rows the master held before binary logs were on never arrive)
#   bench/cluster.sh stop     shut them down cleanly (SIGTERM, wait; SIGKILL after 60 s)
#   bench/cluster.sh status   one line per server; exits 1 if any is down
#
# Environment:
#   PORTS="3307 3308"         one server per port, listening on 127.0.0.1 only
#   VARDIR=var/mariadb        server files go to $VARDIR/<port>/ (relative paths are relative to the repo root):
#                             data/, tmp/, error.log, console.log, install.log, mysqld.pid, mysqld.sock
#                             (tmp/ is private on purpose: a starting mariadbd deletes every "#sql*" file in its
#                             --tmpdir, which would break other servers' temporary tables in a shared /tmp)
#   REPLICA_PORTS="3317 3318" the replicas' ports (stop and status include those with a data directory)
#   SG_USER=shardgate SG_PASSWORD=shardgate
#                             account with ALL PRIVILEGES on '%' (mysql_native_password); database sbtest.
#
# Servers are detached (own session, stdio to console.log) and keep running after this script exits.
# root@localhost has no password and is reachable through the socket only. The data directory is bootstrapped
# on first start; delete $VARDIR/<port> to start from scratch. The system MariaDB service is never used.
# Every server writes binary logs (ROW, full images, GTIDs; server_id = port) for replicas and change streams.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PORTS=${PORTS:-"3307 3308"}
REPLICA_PORTS=${REPLICA_PORTS:-"3317 3318"} # start --replicas: replicas of the first of PORTS
VARDIR=${VARDIR:-var/mariadb}
[[ $VARDIR == /* ]] || VARDIR="$ROOT/$VARDIR"
SG_USER=${SG_USER:-shardgate}
SG_PASSWORD=${SG_PASSWORD:-shardgate}
READY_TIMEOUT=30 # seconds per server to accept connections
STOP_TIMEOUT=60  # seconds per server to shut down before SIGKILL

# Tuned for benchmarks on a small machine; every server gets the same flags.
SERVER_FLAGS=(
	--bind-address=127.0.0.1
	--innodb-buffer-pool-size=256M
	--innodb-log-file-size=128M
	--innodb-flush-log-at-trx-commit=2
	--log-bin=mysql-bin
	--binlog-format=ROW
	--binlog-row-image=FULL
	--binlog-row-metadata=FULL
	--log-slave-updates
	--sync-binlog=0
	--max-connections=2000
	--max-prepared-stmt-count=1048576
	--performance-schema=OFF
	--skip-name-resolve
	--character-set-server=utf8mb4
	--collation-server=utf8mb4_general_ci
)
ROOT_FLAG=()
if [[ $(id -u) -eq 0 ]]; then
	ROOT_FLAG=(--user=root) # mariadbd refuses to run as root without it
fi

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

# find NAME...: print the path of the first program found in PATH, /usr/sbin or /usr/bin.
find_bin() {
	local name dir
	for name in "$@"; do
		if command -v "$name" >/dev/null 2>&1; then
			command -v "$name"
			return 0
		fi
		for dir in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
			if [[ -x $dir/$name ]]; then
				echo "$dir/$name"
				return 0
			fi
		done
	done
	return 1
}

need_mariadb() {
	MARIADBD=$(find_bin mariadbd) &&
		INSTALL_DB=$(find_bin mariadb-install-db) &&
		ADMIN=$(find_bin mariadb-admin) &&
		CLIENT=$(find_bin mariadb) || {
		echo "cluster.sh: MariaDB is not installed (need mariadbd, mariadb-install-db, mariadb-admin, mariadb)." >&2
		echo "Install it with:  apt-get install -y mariadb-server   (or: scripts/deps.sh mariadb)" >&2
		exit 1
	}
}

dir_of() { echo "$VARDIR/$1"; }

# socket_of PORT: the socket path; sockets longer than sun_path allows move to a fixed place in /tmp.
socket_of() {
	local sock
	sock="$(dir_of "$1")/mysqld.sock"
	if ((${#sock} > 100)); then
		sock="${TMPDIR:-/tmp}/shardgate-$(printf '%s' "$sock" | md5sum | cut -c1-12).sock"
	fi
	echo "$sock"
}

# pid_of PORT: print the pid of the running server for PORT, or fail. A zombie or a recycled pid is not running.
pid_of() {
	local dir pidfile pid state
	dir=$(dir_of "$1")
	pidfile="$dir/mysqld.pid"
	[[ -s $pidfile ]] || return 1
	pid=$(<"$pidfile")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[[ -r /proc/$pid/cmdline ]] || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ $state != Z ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--datadir=$dir/data " || return 1
	echo "$pid"
}

# ping PORT: succeed if the server answers on TCP (an access-denied answer counts: the server is up).
ping() {
	"$ADMIN" --no-defaults --skip-ssl --protocol=tcp -h127.0.0.1 -P"$1" -uroot --connect-timeout=2 ping >/dev/null 2>&1
}

tail_log() {
	local log
	log="$(dir_of "$1")/error.log"
	if [[ -f $log ]]; then
		echo "--- tail of $log ---" >&2
		tail -n 30 "$log" >&2
	fi
}

sql_quote() {
	local s=${1//\\/\\\\}
	echo "'${s//\'/\'\'}'"
}

bootstrap() {
	local port=$1 dir
	dir=$(dir_of "$port")
	[[ -d $dir/data/mysql ]] && return 0
	echo "cluster.sh: bootstrapping $dir/data"
	rm -rf "$dir/data"
	mkdir -p "$dir/tmp"
	if ! "$INSTALL_DB" --no-defaults --datadir="$dir/data" --tmpdir="$dir/tmp" --auth-root-authentication-method=normal \
		--skip-test-db --skip-name-resolve --innodb-buffer-pool-size=256M --innodb-log-file-size=128M \
		"${ROOT_FLAG[@]}" >"$dir/install.log" 2>&1; then
		echo "cluster.sh: mariadb-install-db failed for port $port:" >&2
		tail -n 30 "$dir/install.log" >&2
		rm -rf "$dir/data"
		exit 1
	fi
}

# launch PORT: start a detached mariadbd for PORT unless one is running.
launch() {
	local port=$1 dir pid
	dir=$(dir_of "$port")
	if pid=$(pid_of "$port"); then
		echo "cluster.sh: 127.0.0.1:$port already running (pid $pid)"
		return 0
	fi
	bootstrap "$port"
	rm -f "$dir/mysqld.pid"
	mkdir -p "$dir/tmp"
	# setsid: a Ctrl-C in the terminal (e.g. stopping `make run`) must not reach the servers. -w: should setsid
	# have to fork, it waits for mariadbd, so $! lives exactly as long as the server.
	setsid -w "$MARIADBD" --no-defaults --datadir="$dir/data" --port="$port" --socket="$(socket_of "$port")" \
		--pid-file="$dir/mysqld.pid" --log-error="$dir/error.log" --tmpdir="$dir/tmp" \
		--server-id="$port" "${SERVER_FLAGS[@]}" "${ROOT_FLAG[@]}" \
		</dev/null >>"$dir/console.log" 2>&1 &
	echo "$!" >"$dir/launch.pid"
	STARTED+=("$port")
}

# await PORT: wait until a server launched by this run answers, then make sure the account exists.
await() {
	local port=$1 dir launched deadline
	dir=$(dir_of "$port")
	launched=$(<"$dir/launch.pid")
	deadline=$((SECONDS + READY_TIMEOUT))
	until ping "$port"; do
		if ! kill -0 "$launched" 2>/dev/null; then
			echo "cluster.sh: mariadbd for 127.0.0.1:$port exited during startup" >&2
			tail_log "$port"
			echo "cluster.sh: if the data directory is broken, delete $dir to bootstrap it again" >&2
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			echo "cluster.sh: mariadbd for 127.0.0.1:$port not answering after ${READY_TIMEOUT}s" >&2
			tail_log "$port"
			exit 1
		fi
		sleep 0.1 # polling interval
	done
	rm -f "$dir/launch.pid"
	# Idempotent, so a server whose first start was interrupted still gets its account.
	local user pass
	user=$(sql_quote "$SG_USER")
	pass=$(sql_quote "$SG_PASSWORD")
	"$CLIENT" --no-defaults --socket="$(socket_of "$port")" -uroot -e "
		CREATE USER IF NOT EXISTS $user@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD($pass);
		ALTER USER $user@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD($pass);
		GRANT ALL PRIVILEGES ON *.* TO $user@'%' WITH GRANT OPTION;
		CREATE DATABASE IF NOT EXISTS sbtest;" ||
		die "cannot create account $SG_USER on 127.0.0.1:$port"
	echo "cluster.sh: 127.0.0.1:$port up (pid $(pid_of "$port" || echo '?'), data $dir/data)"
}

start() {
	need_mariadb
	STARTED=()
	local port
	for port in $PORTS $(wanted_replicas); do
		launch "$port"
	done
	for port in "${STARTED[@]}"; do
		await "$port"
	done
	for port in $(wanted_replicas); do
		replicate "$port"
	done
}

# wanted_replicas: the replica ports to start (start --replicas) or to
# stop and report (those that have a data directory).
wanted_replicas() {
	local port
	for port in $REPLICA_PORTS; do
		if [[ $WITH_REPLICAS == 1 || -d $(dir_of "$port")/data ]]; then
			echo "$port"
		fi
	done
}

# replicate PORT: make the server on PORT a replica of the first of PORTS
# (GTID replication from the master's first binary log), unless it is one.
replicate() {
	local port=$1 master=${PORTS%% *} user pass
	if [[ -n $("$CLIENT" --no-defaults --socket="$(socket_of "$port")" -uroot -N -e "SHOW SLAVE STATUS") ]]; then
		echo "cluster.sh: 127.0.0.1:$port already replicates"
		return 0
	fi
	user=$(sql_quote "$SG_USER")
	pass=$(sql_quote "$SG_PASSWORD")
	"$CLIENT" --no-defaults --socket="$(socket_of "$port")" -uroot -e "
		CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$master, MASTER_USER=$user, MASTER_PASSWORD=$pass,
			MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
		START SLAVE;" || die "cannot make 127.0.0.1:$port a replica of 127.0.0.1:$master"
	echo "cluster.sh: 127.0.0.1:$port replicates 127.0.0.1:$master"
}

stop() {
	local port pid deadline failed=0
	for port in $PORTS $(wanted_replicas); do
		if pid=$(pid_of "$port"); then
			kill -TERM "$pid"
		fi
	done
	for port in $PORTS $(wanted_replicas); do
		pid=$(pid_of "$port") || {
			echo "cluster.sh: 127.0.0.1:$port stopped"
			continue
		}
		deadline=$((SECONDS + STOP_TIMEOUT))
		while pid_of "$port" >/dev/null; do
			if ((SECONDS >= deadline)); then
				echo "cluster.sh: 127.0.0.1:$port (pid $pid) did not stop in ${STOP_TIMEOUT}s; killing it" >&2
				kill -KILL "$pid" 2>/dev/null || true
				failed=1
				break
			fi
			sleep 0.1 # polling interval
		done
		echo "cluster.sh: 127.0.0.1:$port stopped"
	done
	return "$failed"
}

status() {
	need_mariadb
	local port pid down=0
	for port in $PORTS $(wanted_replicas); do
		if pid=$(pid_of "$port") && ping "$port"; then
			echo "127.0.0.1:$port pid $pid up"
		else
			echo "127.0.0.1:$port pid ${pid:--} down"
			down=1
		fi
		pid=
	done
	return "$down"
}

WITH_REPLICAS=0
if [[ ${2:-} == --replicas ]]; then
	WITH_REPLICAS=1
elif [[ -n ${2:-} ]]; then
	die "unknown option ${2}; the only one is --replicas (with start)"
fi
case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 start [--replicas]|stop|status   (env PORTS, REPLICA_PORTS, VARDIR, SG_USER, SG_PASSWORD)" >&2
	exit 2
	;;
esac
