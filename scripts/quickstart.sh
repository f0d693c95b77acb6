#!/usr/bin/env bash
# scripts/quickstart.sh: run README.md's quick start as written, called by `make test`.
#
# The README is the single source: this script reads the fenced blocks of the section whose heading starts with
# "## Quick start" and runs each block that an HTML comment marks, in order:
#
#   <!-- quickstart: config -->   a YAML shard rule: added to the proxy's ks.yaml below the sbtest1 rule, as the
#                                 README tells the reader to do
#   <!-- quickstart: rule -->     a YAML shard rule that takes the place of the rule of the same db and table
#   <!-- quickstart: start -->    `make run`: its parts are run instead (bench/cluster.sh start, the proxy built
#                                 from this tree on the ks.yaml above), because make run stays in the foreground
#   <!-- quickstart: connect -->  the interactive client command; the `sql` blocks after it are typed into it
#   <!-- quickstart: sql -->      statements run through the last `connect` command with -t (tables, as a
#                                 terminal shows them), in the database of the last USE
#   <!-- quickstart: run -->      shell commands, run by bash -e -o pipefail
#   <!-- quickstart: expect -->   output: its lines must appear, in order and together, in the output of the block
#                                 run just before
#
# So as not to disturb a developer's `make run` (MariaDB on 3307/3308, the proxy on 9696, its admin listener on
# 9797) the quick start runs on other ports of the same width (QS_MARIADB_PORTS="4307 4308", QS_PROXY_PORT=4696,
# QS_ADMIN_PORT=4797): every block's text has those port numbers replaced, and SHARDGATE_ADMIN points bin/shardgate
# at the admin listener. The servers' files, a copy of etc/ks.yaml and the binaries built from this tree are under
# var/quickstart/ (wiped before every run, removed after a passing one; the blocks run in var/quickstart/work,
# which has etc/ks.yaml and bin/). Any failing command, or output that differs from an expect block, fails the run
# with the block's text and the tail of the proxy log. The proxy and the servers are stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

read -r MARIADB1 MARIADB2 <<<"${QS_MARIADB_PORTS:-4307 4308}"
PROXY_PORT=${QS_PROXY_PORT:-4696}
ADMIN_PORT=${QS_ADMIN_PORT:-4797}
export PORTS="$MARIADB1 $MARIADB2"
export VARDIR="$ROOT/var/quickstart"
export SG_USER=shardgate SG_PASSWORD=shardgate
export SHARDGATE_ADMIN="http://127.0.0.1:$ADMIN_PORT"
WORK="$VARDIR/work"
PROXY_LOG="$VARDIR/proxy.log"
START_TIMEOUT=30 # seconds for the proxy to listen
STOP_TIMEOUT=20  # seconds for the proxy to exit after SIGTERM

PROXY_PID=
STEP="setup"
BEGAN=$SECONDS

log() { echo "quickstart: $*"; }

fail() {
	echo "quickstart: FAIL in $STEP: $*" >&2
	exit 1
}

# on_exit RC: after a passing run, the data directories go (about 400 MB; kept after a failure for its logs).
on_exit() {
	(($1 == 0)) || return
	rm -rf "$VARDIR"
	log "PASS in $((SECONDS - BEGAN))s"
}
HARNESS=quickstart LOG_TAIL=40
source scripts/harness.sh # stops the proxy and the servers on exit

# ports TEXT: TEXT with make run's port numbers replaced by the quick start's.
ports() {
	sed -E -e "s/\b3307\b/$MARIADB1/g" -e "s/\b3308\b/$MARIADB2/g" \
		-e "s/\b9696\b/$PROXY_PORT/g" -e "s/\b9797\b/$ADMIN_PORT/g" <<<"$1"
}

# in_use PORT: something listens on 127.0.0.1:PORT.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The marked blocks of the quick start, in order: KINDS[i] and BODIES[i] (the block's lines, each ending in a
# newline, ports replaced).
KINDS=()
BODIES=()
read_blocks() {
	local line section=0 kind= fence= body= n=0
	while IFS= read -r line; do
		n=$((n + 1))
		if [[ -n $fence ]]; then
			if [[ $line == "$fence" ]]; then
				if [[ -n $kind ]]; then
					KINDS+=("$kind")
					BODIES+=("$(ports "$body")"$'\n')
				fi
				fence= kind= body=
			else
				body+="$line"$'\n'
			fi
			continue
		fi
		if [[ $line == '## '* ]]; then
			[[ -z $kind ]] || fail "README.md:$n: the marker for a $kind block has no block before the next heading"
			section=0
			[[ $line != '## Quick start'* ]] || section=1
			continue
		fi
		((section)) || continue
		if [[ $line =~ ^\<!--\ quickstart:\ ([a-z]+)\ --\>$ ]]; then
			[[ -z $kind ]] || fail "README.md:$n: two markers in a row"
			kind=${BASH_REMATCH[1]}
			case $kind in
			config | rule | start | connect | sql | run | expect) ;;
			*) fail "README.md:$n: unknown quickstart marker '$kind'" ;;
			esac
		elif [[ $line =~ ^(\`\`\`+) ]]; then
			fence=${BASH_REMATCH[1]}
		elif [[ -n $kind && -n $line ]]; then
			fail "README.md:$n: text between the '$kind' marker and its block"
		fi
	done <README.md
	[[ -z $fence ]] || fail "README.md: a fenced block of the quick start is not closed"
}

STEP="README.md"
read_blocks
((${#KINDS[@]} > 0)) || fail "no marked blocks in README.md's quick start (is the heading still '## Quick start...'?)"
for want in config start connect sql run expect; do
	[[ " ${KINDS[*]} " == *" $want "* ]] || fail "the quick start has no '$want' block"
done
log "${#KINDS[@]} marked blocks: ${KINDS[*]}"

command -v sysbench >/dev/null || fail "sysbench is not installed (scripts/deps.sh sysbench)"
command -v mariadb >/dev/null || fail "the mariadb client is not installed (scripts/deps.sh mariadb)"

STEP="setup"
bench/cluster.sh stop >/dev/null # a previous run that was killed hard may have left them running
for port in "$MARIADB1" "$MARIADB2" "$PROXY_PORT" "$ADMIN_PORT"; do
	! in_use "$port" || fail "127.0.0.1:$port is in use (set QS_MARIADB_PORTS, QS_PROXY_PORT, QS_ADMIN_PORT)"
done
rm -rf "$VARDIR"
mkdir -p "$WORK/etc" "$WORK/bin"
ports "$(<etc/ks.yaml)" >"$WORK/etc/ks.yaml"
if grep -qE '\b(3307|3308|9696|9797)\b' "$WORK/etc/ks.yaml"; then
	fail "the quick start's ks.yaml still has one of make run's ports"
fi

# The output of the last sql or run block, for expect.
OUTPUT=
CONNECT=
DB=

run_block() {
	local kind=$1 body=$2
	case $kind in
	config)
		awk -v rule="$body" '{ print } /^        table: sbtest1$/ { in_rule = 1 }
			in_rule && /^        sequence: id$/ { printf "%s", rule; in_rule = 0; done = 1 }
			END { exit !done }' "$WORK/etc/ks.yaml" >"$WORK/etc/ks.yaml.new" ||
			fail "etc/ks.yaml changed shape: no sbtest1 rule ending in 'sequence: id' to add the rule below"
		mv "$WORK/etc/ks.yaml.new" "$WORK/etc/ks.yaml"
		;;
	rule)
		local db table
		db=$(sed -nE '1s/^      - db: ([a-z0-9_]+)$/\1/p' <<<"$body")
		table=$(sed -nE '2s/^        table: ([a-z0-9_]+)$/\1/p' <<<"$body")
		[[ -n $db && -n $table ]] || fail "a rule block does not start with '      - db: DB' and '        table: TABLE'"
		awk -v rule="$body" -v db="      - db: $db" -v table="        table: $table" '
			skip && /^        / { next }
			{ skip = 0 }
			$0 == db { held = $0; next }
			held != "" && $0 == table { printf "%s", rule; skip = 1; held = ""; done = 1; next }
			held != "" { print held; held = "" }
			{ print }
			END { exit !done }' "$WORK/etc/ks.yaml" >"$WORK/etc/ks.yaml.new" ||
			fail "etc/ks.yaml has no rule for $db.$table to replace"
		mv "$WORK/etc/ks.yaml.new" "$WORK/etc/ks.yaml"
		;;
	start)
		[[ $body == $'make run\n' ]] || fail "the start block is not 'make run' (this script runs make run's parts)"
		bench/cluster.sh start
		go build -o "$WORK/bin/proxy" ./cmd/proxy
		go build -o "$WORK/bin/shardgate" ./cmd/shardgate
		(cd "$WORK" && exec bin/proxy -config etc/ks.yaml) >"$PROXY_LOG" 2>&1 &
		PROXY_PID=$!
		local deadline=$((SECONDS + START_TIMEOUT))
		until in_use "$PROXY_PORT" && in_use "$ADMIN_PORT"; do
			kill -0 "$PROXY_PID" 2>/dev/null || fail "the proxy exited"
			((SECONDS < deadline)) || fail "the proxy does not listen on $PROXY_PORT and $ADMIN_PORT after ${START_TIMEOUT}s"
			sleep 0.1 # polling interval
		done
		;;
	connect)
		CONNECT=${body%$'\n'}
		[[ $CONNECT != *$'\n'* ]] || fail "a connect block has more than one line"
		;;
	sql)
		[[ -n $CONNECT ]] || fail "an sql block before any connect block"
		local use
		use=$(grep -oiE '^USE [a-z0-9_]+;' <<<"$body" | tail -n 1) || true
		OUTPUT=$({ [[ -z $DB ]] || echo "$DB"; printf '%s' "$body"; } |
			(cd "$WORK" && eval "$CONNECT -t") 2>&1) || {
			echo "$OUTPUT" >&2
			fail "the statements failed"
		}
		[[ -z $use ]] || DB=$use
		echo "$OUTPUT"
		;;
	run)
		OUTPUT=$(cd "$WORK" && bash -e -o pipefail -c "$body" 2>&1) || {
			echo "$OUTPUT" >&2
			fail "a command failed"
		}
		echo "$OUTPUT"
		;;
	expect)
		[[ $'\n'"$OUTPUT"$'\n' == *$'\n'"$body"* ]] || fail "the output above does not contain the expected lines"
		;;
	esac
}

for i in "${!KINDS[@]}"; do
	STEP="block $((i + 1)) (${KINDS[i]}):
${BODIES[i]}"
	log "block $((i + 1)): ${KINDS[i]} ($((SECONDS - BEGAN))s)"
	[[ ${KINDS[i]} == expect ]] || printf '%s' "${BODIES[i]}" | sed 's/^/  > /'
	run_block "${KINDS[i]}" "${BODIES[i]}"
done
