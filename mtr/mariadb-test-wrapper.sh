#!/usr/bin/env bash
# mtr/mariadb-test-wrapper.sh: what mtr/run.sh gives mtr as its mariadb-test (MYSQL_TEST): runs the real one, then
# puts the server back as the run began, so that a test that fails half way (or forgets to clean up) does not make
# the tests after it fail too. mtr restarts its own servers after a failure for the same reason; with --extern it
# cannot. MTR_CLEAN_PORT is where the cleanup connects (the proxy, for the run through it: its pools then follow),
# MTR_SERVER_PORT the server itself (for prepared XA transactions, which are rolled back).
# Globals are set back to the values mtr/run.sh saved in mtr.sg_globals, databases and accounts the test left are
# dropped, and the test database is emptied.
"${MTR_REAL_TEST:-mariadb-test}" "$@"
status=$?
sql=(mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"$MTR_CLEAN_PORT" -uroot --force -N -B)
# XA transactions a test left prepared hold their locks for good (every later test that drops t1 waits): rolled
# back on the server itself (MTR_SERVER_PORT), where they outlive the session that prepared them.
server=(mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"${MTR_SERVER_PORT:-$MTR_CLEAN_PORT}" -uroot --force -N -B)
"${server[@]}" -e "XA RECOVER FORMAT='SQL'" 2>/dev/null | awk -F'\t' 'NF >= 4 { print "XA ROLLBACK " $4 ";" }' |
	"${server[@]}" >/dev/null 2>&1
{
	"${sql[@]}" -e "
SELECT CONCAT('SET GLOBAL ', g.name, ' = ', IF(g.value IS NULL, 'NULL',
       IF(v.VARIABLE_TYPE RLIKE 'INT|DOUBLE|DECIMAL', g.value, QUOTE(g.value))), ';')
  FROM mtr.sg_globals g JOIN information_schema.SYSTEM_VARIABLES v ON v.VARIABLE_NAME = g.name
 WHERE NOT (v.GLOBAL_VALUE <=> g.value);
SELECT CONCAT('DROP DATABASE \`', REPLACE(SCHEMA_NAME, '\`', '\`\`'), '\`;') FROM information_schema.SCHEMATA
 WHERE SCHEMA_NAME NOT IN (SELECT name FROM mtr.sg_databases);
SELECT CONCAT('DROP USER ', QUOTE(User), '@', QUOTE(Host), ';') FROM mysql.global_priv
 WHERE (User, Host) NOT IN (SELECT user, host FROM mtr.sg_users);
" 2>/dev/null
	# The test database emptied object by object (DROP DATABASE fails on a stray file a test left there).
	"${sql[@]}" -e "
SELECT CONCAT('DROP ', CASE TABLE_TYPE WHEN 'VIEW' THEN 'VIEW' WHEN 'SEQUENCE' THEN 'SEQUENCE' ELSE 'TABLE' END,
              ' IF EXISTS test.\`', REPLACE(TABLE_NAME, '\`', '\`\`'), '\`;')
  FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test';
SELECT CONCAT('DROP ', ROUTINE_TYPE, ' IF EXISTS test.\`', REPLACE(ROUTINE_NAME, '\`', '\`\`'), '\`;')
  FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'test';
SELECT CONCAT('DROP EVENT IF EXISTS test.\`', REPLACE(EVENT_NAME, '\`', '\`\`'), '\`;')
  FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'test';
" 2>/dev/null
	echo "ALTER DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci;"
} | "${sql[@]}" >/dev/null 2>&1
if ! "${sql[@]}" -e 'SELECT 1' >/dev/null 2>&1 && [[ -n ${MTR_BROKEN:-} ]]; then
	# The server no longer lets root in: every later test fails for that.
	printf '%s\n' "$*" | grep -o 'main/[^ ]*\.test' | head -1 >>"$MTR_BROKEN"
fi
exit $status
