package router

import (
	"strings"
	"testing"

	"github.com/shardgate/shardgate/config"
)

func TestPolicy(t *testing.T) {
	p, err := NewPolicy(config.DenyKinds, strings.NewReader("# refused by fingerprint\nDELETE FROM t WHERE id = 1\n\nSELECT * FROM big\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sql, want string }{
		{"SHUTDOWN", "shutdown"},
		{"/* x */ shutdown", "shutdown"},
		{"/*!SHUTDOWN*/", "shutdown"},
		{"SET GLOBAL max_connections = 1", "set_global"},
		{"set @@global.max_connections = 1", "set_global"},
		{"SET @x = 1, GLOBAL general_log = 1", "set_global"},
		{"SET @x=1 /*M!, GLOBAL max_connections=1 */", "set_global"},
		{"SET sql_log_bin = 0", "sql_log_bin"},
		{"SET @x=1 /*M!, sql_log_bin=0 */", "sql_log_bin"},
		{"SET STATEMENT sql_log_bin = 0 FOR DELETE FROM t", "sql_log_bin"},
		{"SET STATEMENT max_statement_time = 1 FOR SELECT 1", ""},
		{"SET PASSWORD = PASSWORD('x')", "account"},
		{"SET PASSWORD FOR 'app'@'%' = 'x'", "account"},
		{"ALTER USER CURRENT_USER() IDENTIFIED BY 'x'", "account"},
		{"CREATE USER evil", "account"},
		{"DROP USER shardgate", "account"},
		{"RENAME USER a TO b", "account"},
		{"GRANT ALL ON *.* TO evil", "account"},
		{"REVOKE ALL ON *.* FROM shardgate", "account"},
		{"FLUSH TABLES WITH READ LOCK", "read_lock"},
		{"flush tables t1 with read lock", "read_lock"},
		{"FLUSH TABLES t1 FOR EXPORT", "read_lock"},
		{"BACKUP STAGE START", "read_lock"},
		{"INSTALL SONAME 'ha_blackhole'", "plugin"},
		{"UNINSTALL PLUGIN x", "plugin"},
		{"CHANGE MASTER TO master_host='x'", "replication"},
		{"STOP SLAVE", "replication"},
		{"START REPLICA", "replication"},
		{"RESET MASTER", "replication"},
		{"PURGE BINARY LOGS BEFORE NOW()", "replication"},
		// A text of several statements, checked one by one.
		{"SELECT 1; SHUTDOWN", "shutdown"},
		{"SELECT ';'; SET GLOBAL x = 1", "set_global"},
		{"SELECT 1 /*!; SHUTDOWN */", "shutdown"},
		// Stored programs run with the backend account's rights.
		{"CREATE PROCEDURE p() KILL 5", "stored_program"},
		{"CREATE DEFINER=CURRENT_USER PROCEDURE p(id INT) BEGIN KILL QUERY id; END", "stored_program"},
		// Split at its semicolons, the body shows its SHUTDOWN first.
		{"create or replace procedure p() begin declare x int; set x = 1; shutdown; end", "shutdown"},
		{"CREATE FUNCTION f() RETURNS INT BEGIN SET GLOBAL max_connections = 1; RETURN 1; END", "stored_program"},
		{"CREATE PROCEDURE p() SET @@global.max_connections = 1", "stored_program"},
		{"CREATE PROCEDURE p() BEGIN PREPARE s FROM CONCAT('KI', 'LL 5'); EXECUTE s; END", "stored_program"},
		{"CREATE PROCEDURE p() EXECUTE IMMEDIATE 'SELECT 1'", "stored_program"},
		{"CREATE TRIGGER t BEFORE INSERT ON x FOR EACH ROW BEGIN FLUSH TABLES WITH READ LOCK; END", "stored_program"},
		{"CREATE EVENT e ON SCHEDULE EVERY 1 SECOND DO GRANT ALL ON *.* TO evil", "stored_program"},
		{"ALTER EVENT e DO CREATE USER evil", "stored_program"},
		{"CREATE PROCEDURE p() /*!KILL 5 */ SELECT 1", "stored_program"},
		{"CREATE PROCEDURE p() BEGIN SELECT '\\'; KILL 5; SELECT '\\'; END", "stored_program"},
		{"CREATE PROCEDURE p() BEGIN SELECT 'x\\''; KILL 5; -- '; END", "stored_program"},
		{"SELECT 1; CREATE PROCEDURE p() BEGIN SELECT 1; KILL 5; END", "stored_program"},
		{"CREATE PROCEDURE p() BEGIN SET sql_log_bin = 0; END", "stored_program"},
		{"CREATE PROCEDURE p() BEGIN STOP SLAVE; END", "stored_program"},
		{"CREATE PROCEDURE p() BEGIN SELECT 'KILL 5', `kill` FROM t; /* KILL */ END", ""},
		{"CREATE PROCEDURE p(x INT) BEGIN DECLARE c CURSOR FOR SELECT a FROM t; SET x = 1; UPDATE t SET a = x; END", ""},
		{"CREATE FUNCTION f() RETURNS INT RETURN 1", ""},
		{"CREATE TABLE killed (id INT)", ""},
		// The blacklist, by fingerprint.
		{"delete from t where id=42", "blacklist"},
		{"SELECT  *  FROM big -- all of it", "blacklist"},
		{"SELECT 1; select * from BIG", "blacklist"},
		// Allowed.
		{"SELECT 1", ""},
		{"SET @x = 1, SESSION sql_mode = ''", ""},
		{"SET NAMES utf8mb4", ""},
		{"FLUSH TABLES", ""},
		{"CREATE TABLE users (id INT)", ""},
		{"DROP TABLE user_log", ""},
		{"SELECT 'SHUTDOWN; SET GLOBAL x=1'", ""},
		{"START TRANSACTION", ""},
		{"DELETE FROM t WHERE id = 1 AND x = 2", ""},
	} {
		st := Classify(tc.sql, 0)
		if got := p.Check(tc.sql, &st); got != tc.want {
			t.Errorf("Check(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
	// deny_statements: [] allows every kind.
	open, _ := NewPolicy(nil, nil)
	if st := Classify("SHUTDOWN", 0); open.Check("SHUTDOWN", &st) != "" {
		t.Errorf("empty deny list refuses SHUTDOWN")
	}
}

func TestFingerprint(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"SELECT * FROM t WHERE id = 1", "select*from t where id=?"},
		{"select *\n from   t where id=42 -- x", "select*from t where id=?"},
		{"SELECT /* c */ `Col` FROM T WHERE s = 'a''b' AND n IN (1, 2.5)", "select `col` from t where s=? and n in(?,?)"},
		{"SELECT c1 FROM t2", "select c1 from t2"},
	} {
		if got := Fingerprint(tc.sql); got != tc.want {
			t.Errorf("Fingerprint(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}
