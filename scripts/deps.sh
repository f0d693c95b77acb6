#!/usr/bin/env bash
# scripts/deps.sh [mariadb] [sysbench] [openssl] [mtr] [clients] [chromium] [etcd]: make sure the named tools are installed (mariadb and
# sysbench when none are named). clients are the client libraries of the client matrix (clients/clients_test.go):
# PyMySQL, mysqlclient and SQLAlchemy for Debian's /usr/bin/python3, MariaDB Connector/J with a JDK, PHP with
# PDO_MySQL and mysqli. etcd is the server and etcdctl the fleet tests run (internal/etcdtest, package topo).
#
# Missing tools are installed with apt-get when running as root; otherwise the script prints the exact command
# and exits 1. Installing mariadb-server may make Debian's postinst try to start the system service
# ("policy-rc.d denied execution" in containers); that is harmless: shardgate never uses the system service, only
# servers started by bench/cluster.sh and internal/mariadbtest.
set -euo pipefail

# have NAME: the program is in PATH or in the directories Debian installs it to (/usr/sbin is often not in PATH).
have() {
	command -v "$1" >/dev/null 2>&1 || [[ -x /usr/sbin/$1 || -x /usr/bin/$1 ]]
}

missing_pkgs() {
	local tool
	for tool in "$@"; do
		case $tool in
		mariadb)
			if ! have mariadbd || ! have mariadb-install-db || ! have mariadb || ! have mariadb-admin; then
				echo mariadb-server mariadb-client
			fi
			;;
		sysbench)
			have sysbench || echo sysbench
			;;
		openssl)
			have openssl || echo openssl
			;;
		mtr)
			[[ -x /usr/share/mysql/mysql-test/mtr ]] || echo mariadb-test
			;;
		clients)
			# The Debian python3, not a pyenv one earlier in PATH: the python3-* packages install there.
			local mod pkg
			for mod in pymysql:python3-pymysql MySQLdb:python3-mysqldb sqlalchemy:python3-sqlalchemy; do
				pkg=${mod#*:}
				mod=${mod%%:*}
				{ [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import $mod" >/dev/null 2>&1; } || echo "$pkg"
			done
			{ have java && have javac; } || echo default-jdk-headless
			[[ -f /usr/share/java/mariadb-java-client.jar ]] || echo libmariadb-java
			have php || echo php-cli
			{ have php && php -r 'exit(extension_loaded("pdo_mysql") && extension_loaded("mysqli") ? 0 : 1);' >/dev/null 2>&1; } ||
				echo php-mysql
			;;
		chromium)
			# The status page's browser test (proxy/server/status_test.go).
			have chromium || echo chromium
			;;
		etcd)
			# The fleet's store (package topo; internal/etcdtest starts throwaway servers).
			have etcd || echo etcd-server
			have etcdctl || echo etcd-client
			;;
		*)
			echo "usage: $0 [mariadb] [sysbench] [openssl] [mtr] [clients] [chromium] [etcd]" >&2
			exit 2
			;;
		esac
	done
}

tools=("$@")
((${#tools[@]})) || tools=(mariadb sysbench)
pkgs=$(missing_pkgs "${tools[@]}" | tr '\n' ' ')
pkgs=${pkgs% }
[[ -n $pkgs ]] || exit 0

echo "deps.sh: missing packages: $pkgs" >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps.sh: no apt-get here; install these packages with your package manager: $pkgs" >&2
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "deps.sh: not root; install them with:" >&2
	echo "  sudo apt-get update && sudo apt-get install -y $pkgs" >&2
	exit 1
fi

# shellcheck disable=SC2086 # pkgs is a list of package names
apt-get -o DPkg::Lock::Timeout=300 update
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y $pkgs

still=$(missing_pkgs "${tools[@]}" | tr '\n' ' ')
if [[ -n ${still// /} ]]; then
	echo "deps.sh: still missing after apt-get install: $still" >&2
	exit 1
fi
echo "deps.sh: installed $pkgs"
