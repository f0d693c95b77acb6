#!/usr/bin/env bash
# bench/fleet-proxy.sh -config CFG [-log-level L]: bench/run.sh's variant binary for bench/fleet.sh. It runs bin/proxy as
# one proxy of the fleet FLEET_CLUSTER on FLEET_ETCD (the topology comes from etcd; bench/fleet.sh stored CFG there),
# listening where CFG says (addr, web_addr). exec: run.sh measures this pid.
set -euo pipefail
cfg="" level=warn
while (($#)); do
	case $1 in
	-config) cfg=$2; shift 2 ;;
	-log-level) level=$2; shift 2 ;;
	*) echo "fleet-proxy.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[[ -n $cfg && -n ${FLEET_ETCD:-} && -n ${FLEET_CLUSTER:-} ]] || { echo "fleet-proxy.sh: want -config CFG, FLEET_ETCD and FLEET_CLUSTER" >&2; exit 2; }
get() { awk -v k="$1:" '$1 == k {print $2; exit}' "$cfg"; }
exec "$(dirname "$0")/../bin/proxy" -etcd "$FLEET_ETCD" -cluster "$FLEET_CLUSTER" -addr "$(get addr)" -web-addr "$(get web_addr)" -log-level "$level"
