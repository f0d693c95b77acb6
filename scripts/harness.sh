# scripts/harness.sh: the exit of a script that runs the proxy on bench/cluster.sh's servers, sourced by
# bench/smoke.sh and scripts/quickstart.sh (not run on its own).
#
# Sourcing it sets the EXIT trap (INT and TERM exit 1, so they end there too). On exit, whatever the status, it
# stops the proxy (SIGTERM, SIGKILL after STOP_TIMEOUT seconds), prints the last LOG_TAIL lines of PROXY_LOG after
# a failure, stops the servers (bench/cluster.sh stop), calls the script's on_exit RC if it defines one (its own
# files, its PASS line), prints "HARNESS: FAILED (exit RC)" after a failure, and exits with the script's status.
#
# The script sets before sourcing: HARNESS (its name, the prefix of its lines), PROXY_LOG, STOP_TIMEOUT, LOG_TAIL,
# and PROXY_PID (empty until it starts the proxy; empty again once it has stopped it itself).

harness_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	if [[ -n $PROXY_PID ]] && kill -0 "$PROXY_PID" 2>/dev/null; then
		kill -TERM "$PROXY_PID"
		local deadline=$((SECONDS + STOP_TIMEOUT))
		while kill -0 "$PROXY_PID" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
		kill -KILL "$PROXY_PID" 2>/dev/null
		wait "$PROXY_PID" 2>/dev/null
	fi
	if ((rc != 0)) && [[ -f $PROXY_LOG ]]; then
		echo "--- tail of $PROXY_LOG ---" >&2
		tail -n "$LOG_TAIL" "$PROXY_LOG" >&2
		echo "---" >&2
	fi
	bench/cluster.sh stop >/dev/null
	if declare -F on_exit >/dev/null; then
		on_exit "$rc"
	fi
	if ((rc != 0)); then
		echo "$HARNESS: FAILED (exit $rc)" >&2
	fi
	exit "$rc"
}
trap harness_cleanup EXIT
trap 'exit 1' INT TERM
