#!/usr/bin/env bash
# scripts/deps.sh [mariadb] [sysbench] [openssl] [mtr] [clients] [chromium] [etcd] [kafka]: make sure the named tools are installed (mariadb and
# sysbench when none are named). clients are the client libraries of the client matrix (clients/clients_test.go):
# PyMySQL, mysqlclient and SQLAlchemy for Debian's /usr/bin/python3, MariaDB Connector/J with a JDK, PHP with
# PDO_MySQL and mysqli. etcd is the server and etcdctl the fleet tests run (internal/etcdtest, package topo).
# kafka is Java 17+ and Maven, then the jars of the Apache Kafka broker that internal/kafkatest runs, fetched
# once with Maven (scripts/kafka/pom.xml names the version) into ${XDG_CACHE_HOME:-~/.cache}/shardgate/kafka/lib
# (about 45 MB; Maven keeps its own copy in ~/.m2), and a broker is run once to write the JVM class archive
# kafka.jsa beside lib (about 50 MB; brokers then start with a third less CPU). A changed pom.xml fetches again;
# delete the directory to force it.
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
		kafka)
			# The broker of the Kafka sink's tests and benchmarks (internal/kafkatest); fetch_kafka brings its jars.
			have java || echo default-jre-headless
			have mvn || echo maven
			;;
		*)
			echo "usage: $0 [mariadb] [sysbench] [openssl] [mtr] [clients] [chromium] [etcd] [kafka]" >&2
			exit 2
			;;
		esac
	done
}

# fetch_kafka copies the broker's jars (scripts/kafka/pom.xml and its runtime dependencies) into the cache
# internal/kafkatest reads, unless the cache already holds the jars of this very pom.xml. It fails loudly.
fetch_kafka() {
	local root pom cache sum major
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	pom=$root/scripts/kafka/pom.xml
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/shardgate/kafka
	major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
	if [[ ${major%%.*} -lt 17 ]]; then
		echo "deps.sh: kafka: Kafka 4 needs Java 17 or later; java in PATH is ${major:-unknown}" >&2
		exit 1
	fi
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	flock 9 # one fetch at a time; a second deps.sh finds the first one's result
	sum=$(sha256sum "$pom" | cut -d' ' -f1)
	if [[ -f $cache/pom.sha256 && $(<"$cache/pom.sha256") == "$sum" ]] && compgen -G "$cache/lib/kafka_2.13-*.jar" >/dev/null; then
		[[ -f $cache/kafka.jsa && -f $cache/kafka-bootstrap.checkpoint ]] || kafka_class_archive "$root" "$cache"
		return 0
	fi
	echo "deps.sh: fetching the Kafka broker's jars ($pom) into $cache/lib" >&2
	rm -rf "$cache/lib.new" "$cache/pom.sha256" "$cache/kafka.jsa" "$cache/kafka-bootstrap.checkpoint"
	if ! mvn -q -B -f "$pom" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
		-DoutputDirectory="$cache/lib.new" -DincludeScope=runtime >"$cache/mvn.log" 2>&1; then
		echo "deps.sh: kafka: mvn failed; its output ($cache/mvn.log) ends with:" >&2
		tail -n 30 "$cache/mvn.log" >&2
		exit 1
	fi
	if ! compgen -G "$cache/lib.new/kafka_2.13-*.jar" >/dev/null || ! compgen -G "$cache/lib.new/log4j-slf4j2-impl-*.jar" >/dev/null; then
		echo "deps.sh: kafka: mvn left no kafka_2.13 or log4j-slf4j2-impl jar in $cache/lib.new" >&2
		exit 1
	fi
	rm -rf "$cache/lib"
	mv "$cache/lib.new" "$cache/lib"
	echo "$sum" >"$cache/pom.sha256"
	echo "deps.sh: kafka: $(ls "$cache/lib" | wc -l) jars, $(du -sh "$cache/lib" | cut -f1) in $cache/lib" >&2
	kafka_class_archive "$root" "$cache"
}

# kafka_class_archive ROOT CACHE runs a broker once (internal/kafkatest.WriteClassArchive) so that its JVM
# writes CACHE/kafka.jsa, and keeps the storage tool's CACHE/kafka-bootstrap.checkpoint; it also proves the
# broker starts here.
kafka_class_archive() {
	echo "deps.sh: kafka: starting a broker once to write the class archive $2/kafka.jsa" >&2
	if ! (cd "$1" && "${GO:-go}" run ./internal/kafkatest/kafkabroker -class-archive); then
		echo "deps.sh: kafka: the broker did not start or wrote no class archive (see above)" >&2
		exit 1
	fi
}

# after_install runs the steps that need the installed packages.
after_install() {
	local tool
	for tool in "${tools[@]}"; do
		[[ $tool != kafka ]] || fetch_kafka
	done
}

tools=("$@")
((${#tools[@]})) || tools=(mariadb sysbench)
pkgs=$(missing_pkgs "${tools[@]}" | tr '\n' ' ')
pkgs=${pkgs% }
if [[ -z $pkgs ]]; then
	after_install
	exit 0
fi

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
after_install
