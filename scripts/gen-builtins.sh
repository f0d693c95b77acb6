#!/bin/bash
# Prints the words that cannot name a stored function in a call, for
# router/builtins.go's notRoutineWords: of MariaDB's keywords, native
# functions and help-table names (the server at $1, host:port, root
# without password, as bench/cluster.sh starts it), those for which
# `SELECT word()` in a database without routines fails otherwise than
# with 1305 (FUNCTION ... does not exist): a syntax error (a reserved
# word), a wrong argument count or a value (a native function).
set -euo pipefail
host=${1%:*} port=${1#*:}
q() { mariadb -h"$host" -P"$port" -uroot -N "$@"; }
q -e "CREATE DATABASE IF NOT EXISTS gen_builtins_empty"
q -e "SELECT word FROM information_schema.KEYWORDS UNION SELECT function FROM information_schema.SQL_FUNCTIONS
	UNION SELECT name FROM mysql.help_keyword UNION SELECT REPLACE(name, ' FUNCTION', '') FROM mysql.help_topic" |
	tr a-z A-Z | grep -E '^[A-Z_][A-Z0-9_]*$' | sort -u |
	while read -r w; do
		out=$(q gen_builtins_empty -e "SELECT $w()" 2>&1 || true)
		[[ $out == *"ERROR 1305"* ]] || echo "$w"

	done
q -e "DROP DATABASE gen_builtins_empty"
