#!/usr/bin/env bash
# scripts/deps.sh [mariadb] [sysbench] [openssl] [mtr]: make sure the named tools are installed (both when none are named).
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
		*)
			echo "usage: $0 [mariadb] [sysbench] [openssl] [mtr]" >&2
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
