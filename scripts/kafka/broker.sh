#!/usr/bin/env bash
# scripts/kafka/broker.sh start DIR [kafkabroker flags]: run a throwaway single-node Kafka broker for a benchmark
# in DIR (emptied first) and print its address (host:port) once it answers; it runs in the background until
# scripts/kafka/broker.sh stop DIR. addr DIR prints the address of a running one.
#
# The broker is internal/kafkatest's (the jars that scripts/deps.sh kafka fetched into
# ~/.cache/shardgate/kafka/lib, free 127.0.0.1 ports, KRaft, configuration, data and kafka.log in DIR), run by
# bin/kafkabroker with a 1 GB heap, both JIT compilers and G1 (-quick and -heap change that; -prop key=value adds
# a server property). Example:
#
#	addr=$(scripts/kafka/broker.sh start var/bench-kafka/broker)
#	...
#	scripts/kafka/broker.sh stop var/bench-kafka/broker
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage() {
	echo "usage: $0 start DIR [kafkabroker flags] | stop DIR | addr DIR" >&2
	exit 2
}
(($# >= 2)) || usage
cmd=$1
dir=$2
shift 2

running() {
	[[ -f $dir/kafkabroker.pid ]] && kill -0 "$(<"$dir/kafkabroker.pid")" 2>/dev/null
}

case $cmd in
start)
	if running; then
		echo "broker.sh: a broker already runs in $dir (pid $(<"$dir/kafkabroker.pid"))" >&2
		exit 1
	fi
	(cd "$root" && "${GO:-go}" build -o bin/kafkabroker ./internal/kafkatest/kafkabroker)
	rm -rf "$dir"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	"$root/bin/kafkabroker" -dir "$dir/broker" -addr-file "$dir/addr" "$@" >"$dir/kafkabroker.log" 2>&1 &
	echo $! >"$dir/kafkabroker.pid"
	for _ in $(seq 1 1200); do
		if [[ -s $dir/addr ]]; then
			cat "$dir/addr"
			exit 0
		fi
		if ! running; then
			echo "broker.sh: the broker did not start; $dir/kafkabroker.log:" >&2
			tail -n 40 "$dir/kafkabroker.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "broker.sh: no address from the broker in $dir within 120 s" >&2
	exit 1
	;;
stop)
	running || exit 0
	pid=$(<"$dir/kafkabroker.pid")
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	rm -f "$dir/kafkabroker.pid" "$dir/addr"
	;;
addr)
	running && [[ -s $dir/addr ]] || {
		echo "broker.sh: no broker runs in $dir" >&2
		exit 1
	}
	cat "$dir/addr"
	;;
*)
	usage
	;;
esac
