package router

import "testing"

// TestClassify lists statements with the facts the proxy acts on,
// including literals, quoted names and comments that hold the keywords:
// text the server does not read as keywords decides nothing.
func TestClassify(t *testing.T) {
	type facts struct {
		kind    Kind
		keyword string
		sticky  bool
		lastID  bool
		commit  bool // ImplicitCommit
		outside bool // OutsideTxn
		replica ReplicaUse
	}
	read := func(r ReplicaUse) facts { return facts{kind: KindRead, keyword: "SELECT", replica: r} }
	sticky := func(kind Kind, kw string) facts { return facts{kind: kind, keyword: kw, sticky: true} }
	ddl := func(kw string, commit bool) facts {
		return facts{kind: KindDDL, keyword: kw, commit: commit, outside: commit, sticky: !commit}
	}
	tests := []struct {
		sql  string
		mode Mode
		want facts
	}{
		{"SELECT 1", 0, read(ReplicaAny)},
		{"  /* c */ select c from sbtest1 where id=5", 0, read(ReplicaAny)},
		{"-- note\nSELECT 1", 0, read(ReplicaAny)},
		{"# note\nSELECT 1", 0, read(ReplicaAny)},
		{"(SELECT 1) UNION (SELECT 2)", 0, read(ReplicaAny)},
		{"/*!40101 SET NAMES utf8 */", 0, sticky(KindOther, "SET")},
		{"/*M!100000 SET @x=1 */", 0, sticky(KindOther, "SET")},
		{"select @@version_comment limit 1", 0, read(ReplicaAny)},
		{"select @a", 0, read(ReplicaAny)}, // reading: the session carries user variables
		{"select @`a b`", 0, read(ReplicaAny)},
		{"select @a := 1", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"select 1 into @a", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"select c from t into   @a, @b", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		// Comments and odd blanks between INTO and the variable.
		{"select c from t into /* x */ @a", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"select c from t into\f-- x\n@a", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"select c from t into/*!@a*/", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"select c from t into outfile '/tmp/x'", 0, read(ReplicaNever)},
		{"select 'into @a'", 0, read(ReplicaAny)},
		{"insert into t values (@a)", 0, facts{kind: KindWrite, keyword: "INSERT"}},
		{"LOAD DATA LOCAL INFILE 'f' INTO TABLE t (@v) SET c = @v", 0, facts{kind: KindWrite, keyword: "LOAD", sticky: true}},
		{"LOAD DATA LOCAL INFILE 'f' INTO TABLE t", 0, facts{kind: KindWrite, keyword: "LOAD"}},
		{"SET autocommit=0", 0, sticky(KindOther, "SET")},
		{"insert into t values (1)", 0, facts{kind: KindWrite, keyword: "INSERT"}},
		{"SELECT LAST_INSERT_ID()", 0, facts{kind: KindRead, keyword: "SELECT", lastID: true}},
		{"SELECT LAST_INSERT_ID( /* c */ )", 0, facts{kind: KindRead, keyword: "SELECT", lastID: true}},
		{"SELECT LAST_INSERT_ID(5)", 0, facts{kind: KindRead, keyword: "SELECT", lastID: true, sticky: true}},
		{"UPDATE t SET id = LAST_INSERT_ID(id + 1)", 0, facts{kind: KindWrite, keyword: "UPDATE", lastID: true, sticky: true}},
		{"SELECT 'LAST_INSERT_ID(5)'", 0, read(ReplicaAny)},
		{"select sql_calc_found_rows * from t limit 1", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT GET_LOCK('a', 1)", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT 'GET_LOCK(1)'", 0, read(ReplicaAny)},
		{"SELECT `get_lock` FROM t", 0, read(ReplicaAny)},
		{"SELECT NEXT VALUE FOR s", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT NEXTVAL(s)", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT LASTVAL(s)", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT PREVIOUS VALUE FOR s", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT c FROM t WHERE id = 1 FOR UPDATE", 0, read(ReplicaNever)},
		{"SELECT c FROM t WHERE id = 1 LOCK IN SHARE MODE", 0, read(ReplicaNever)},
		{"SELECT c FROM t WHERE id = 1 FOR SHARE", 0, read(ReplicaNever)},
		{"SELECT c FROM t WHERE c = 'FOR UPDATE'", 0, read(ReplicaAny)},
		{"SELECT SLEEP(1)", 0, read(ReplicaNever)},
		{"SELECT MASTER_GTID_WAIT('0-1-5')", 0, read(ReplicaNever)},
		{"/*master*/ SELECT 1", 0, read(ReplicaNever)},
		{"SELECT /* master */ 1", 0, read(ReplicaNever)},
		{"SELECT 1 /*master*/", 0, read(ReplicaAny)}, // not where hints go
		{"/*slave*/ SELECT 1", 0, read(ReplicaAny)},
		{"SHOW TABLES", 0, facts{kind: KindRead, keyword: "SHOW", replica: ReplicaFollow}},
		{"SELECT 1; SELECT 2", 0, read(ReplicaNever)},
		{"create temporary table x (a int)", 0, ddl("CREATE", false)},
		{"create or replace temporary table x (a int)", 0, ddl("CREATE", false)},
		{"drop temporary table if exists x", 0, ddl("DROP", false)},
		{"create table x (a int)", 0, ddl("CREATE", true)},
		// The word in a literal, a comment or a quoted name is no
		// temporary table: the DDL commits.
		{"create table x (a varchar(9) default 'TEMPORARY')", 0, facts{kind: KindDDL, keyword: "CREATE", commit: true, outside: true}},
		{"create table x /* temporary */ (a int)", 0, ddl("CREATE", true)},
		{"create table `temporary` (a int)", 0, ddl("CREATE", true)},
		{"alter table x add column temporary int", 0, facts{kind: KindDDL, keyword: "ALTER", commit: true, outside: true, sticky: true}},
		{"TRUNCATE t", 0, ddl("TRUNCATE", true)},
		{"FLUSH TABLES WITH READ LOCK", 0, facts{kind: KindDDL, keyword: "FLUSH", commit: true, outside: true, sticky: true}},
		{"FLUSH TABLES", 0, ddl("FLUSH", true)},
		{"BEGIN", 0, facts{kind: KindTxn, keyword: "BEGIN"}},
		{"start transaction read only", 0, facts{kind: KindTxn, keyword: "START"}},
		{"START SLAVE", 0, sticky(KindOther, "START")},
		{"commit", 0, facts{kind: KindTxn, keyword: "COMMIT"}},
		{"LOCK TABLES t WRITE", 0, facts{kind: KindOther, keyword: "LOCK", sticky: true, outside: true, commit: true}},
		{"UNLOCK TABLES", 0, facts{kind: KindOther, keyword: "UNLOCK", sticky: true, outside: true}},
		{"PREPARE s FROM 'select 1'", 0, sticky(KindOther, "PREPARE")},
		{"USE db", 0, sticky(KindOther, "USE")},
		{"KILL QUERY 5", 0, facts{kind: KindKill, keyword: "KILL"}},
		{"", 0, facts{kind: KindEmpty}},
		{"  ;  ", 0, facts{kind: KindEmpty}},
		{"/* only a comment */", 0, facts{kind: KindEmpty}},
		{"/* unterminated", 0, facts{kind: KindEmpty}},
		{"--", 0, facts{kind: KindEmpty}},
		// A backslash escapes the quote unless NO_BACKSLASH_ESCAPES:
		// then the literal ends there and GET_LOCK is a call.
		{`SELECT 'a\' GET_LOCK(1) '`, 0, read(ReplicaAny)},
		{`SELECT 'a\' , GET_LOCK('x', 1), '`, ModeNoBackslashEscapes, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{`SELECT "x GET_LOCK(1)"`, ModeANSIQuotes, read(ReplicaAny)},
		// The account part of 'u'@'h' reads as a variable, which decides
		// nothing unless assigned.
		{"GRANT SELECT ON db.* TO 'u'@'h'", 0, facts{kind: KindDDL, keyword: "GRANT", commit: true, outside: true}},
		// A variable right after a word is one (the server's lexer reads
		// SELECT@a as SELECT @a).
		{"SELECT@a:=1", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT x INTO@v FROM t", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"DO@a:=1", 0, facts{KindRead, "DO", true, false, false, false, ReplicaNever}},
		// Under ANSI_QUOTES a "name" has no backslash escapes.
		{`SELECT 1 AS "a\", GET_LOCK('x',1) AS "b"`, ModeANSIQuotes, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		// 1. is a number: the word after it is a keyword.
		{"SELECT 1. INTO @x", 0, facts{KindRead, "SELECT", true, false, false, false, ReplicaNever}},
		{"SELECT t1.temporary FROM t1", 0, read(ReplicaAny)},
	}
	for _, tt := range tests {
		st := Classify(tt.sql, tt.mode)
		got := facts{st.Kind, st.Keyword, st.Sticky, st.UsesLastInsertID, st.ImplicitCommit, st.OutsideTxn, st.Replica}
		if got != tt.want {
			t.Errorf("Classify(%q)\n got %+v\nwant %+v", tt.sql, got, tt.want)
		}
	}
}

func TestClassifyFlags(t *testing.T) {
	tests := []struct {
		sql   string
		check func(Stmt) bool
	}{
		{"UNLOCK TABLES", func(s Stmt) bool { return s.UnlockTables }},
		{"unlock table;", func(s Stmt) bool { return s.UnlockTables }},
		{"UNLOCK TABLES x", func(s Stmt) bool { return !s.UnlockTables }},
		{"LOCK TABLES t READ", func(s Stmt) bool { return s.LockTables }},
		{"SET GLOBAL max_connections = 10", func(s Stmt) bool { return s.SetsGlobal }},
		{"SET @@global.max_connections = 10", func(s Stmt) bool { return s.SetsGlobal }},
		{"SET @@session.sql_mode = ''", func(s Stmt) bool { return !s.SetsGlobal }},
		{"SET @a = 'GLOBAL'", func(s Stmt) bool { return !s.SetsGlobal }},
		{"SELECT @@global.max_connections", func(s Stmt) bool { return !s.SetsGlobal }},
		{"START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */", func(s Stmt) bool { return s.Executable && s.Kind == KindTxn }},
		{"SELECT 1; SELECT 2", func(s Stmt) bool { return s.Multi }},
		{"SELECT 1;", func(s Stmt) bool { return !s.Multi }},
		{"SELECT 1; \n\t", func(s Stmt) bool { return !s.Multi }},
		{"SELECT ';'", func(s Stmt) bool { return !s.Multi }},
		// The server runs a comment after ';' as a statement of its own.
		{"SELECT 1; -- x", func(s Stmt) bool { return s.Multi }},
		{"SELECT 1; /* x */", func(s Stmt) bool { return s.Multi }},
		{"SET x = @@global.y", func(s Stmt) bool { return !s.SetsGlobal }},
		{"SET @a = 1, @@global.max_connections = 10", func(s Stmt) bool { return s.SetsGlobal }},
		{"SET @a = 1, GLOBAL max_connections = 10", func(s Stmt) bool { return s.SetsGlobal }},
		{"SELECT @@last_insert_id", func(s Stmt) bool { return s.UsesLastInsertID && s.Replica == ReplicaNever }},
		{"SELECT @@session.identity", func(s Stmt) bool { return s.UsesLastInsertID }},
		{" \t\n", func(s Stmt) bool { return s.Blank && s.Kind == KindEmpty }},
		{"/**/", func(s Stmt) bool { return !s.Blank && s.Kind == KindEmpty }},
		{"EXECUTE /* x */ IMMEDIATE 'SELECT 1'", func(s Stmt) bool { return s.SecondIs("IMMEDIATE") }},
	}
	for _, tt := range tests {
		if st := Classify(tt.sql, 0); !tt.check(st) {
			t.Errorf("Classify(%q) = %+v", tt.sql, st)
		}
	}
}

// TestClassifyPrograms: a stored program is one statement whatever its
// body holds (mysqldump writes triggers and routines before the tables
// they name), and its body's words decide nothing; BEGIN NOT ATOMIC runs
// at once, so its words count, but its ';' do not split it.
func TestClassifyPrograms(t *testing.T) {
	tests := []struct {
		sql                    string
		multi, sticky, program bool
	}{
		{"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.a = 1; SET @x := NEW.a; END", false, false, true},
		{"/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN\n IF NEW.a > 0 THEN SET NEW.a = 0; END IF;\n END */", false, false, true},
		{"CREATE DEFINER=`u`@`%` PROCEDURE p() BEGIN DECLARE x INT; CASE x WHEN 1 THEN SELECT 1; ELSE SELECT GET_LOCK('a', 1); END CASE; WHILE x < 3 DO SET x = x + 1; END WHILE; END", false, false, true},
		{"CREATE FUNCTION f() RETURNS INT BEGIN RETURN (SELECT CASE WHEN 1 THEN 2 END); END", false, false, true},
		{"CREATE PROCEDURE p() BEGIN lbl: LOOP LEAVE lbl; END LOOP lbl; BEGIN SELECT 1; END; END", false, false, true},
		{"CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN DELETE FROM t; INSERT INTO t VALUES (1); END", false, false, true},
		{"CREATE PROCEDURE p() SELECT 1; SELECT 2", true, false, true},
		{"CREATE PROCEDURE p() BEGIN SELECT 1; END; SELECT 2", true, false, true},
		{"BEGIN NOT ATOMIC DECLARE x INT; SELECT GET_LOCK('a', 1); END", false, true, false},
		{"BEGIN; SELECT 1", true, false, false},
		{"CREATE TABLE event (procedure INT); SELECT 1", true, false, false},
		{"CREATE TABLE t (a INT COMMENT 'TRIGGER')", false, false, false},
	}
	for _, tt := range tests {
		st := Classify(tt.sql, 0)
		if st.Multi != tt.multi || st.Sticky != tt.sticky || st.Program != tt.program {
			t.Errorf("Classify(%q): multi %v sticky %v program %v; want %v %v %v", tt.sql, st.Multi, st.Sticky, st.Program, tt.multi, tt.sticky, tt.program)
		}
	}
}

func TestClassifyAllocs(t *testing.T) {
	for _, sql := range []string{"SELECT c FROM sbtest1 WHERE id=4821", "select c from sbtest1 where id = 'x'",
		"UPDATE sbtest1 SET k=k+1 WHERE id=5", "BEGIN", "COMMIT", "INSERT INTO t VALUES (1, 'a')"} {
		if n := testing.AllocsPerRun(100, func() { Classify(sql, 0) }); n != 0 {
			t.Errorf("Classify(%q) allocates %v times", sql, n)
		}
	}
}

func BenchmarkClassify(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Classify("SELECT c FROM sbtest1 WHERE id=4821", 0)
	}
}

// FuzzClassify checks that Classify never panics and is deterministic.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"SELECT 1", "/*!40101 SET x=1*/", "select 'a\\' b", "SELECT LAST_INSERT_ID(", "@", "'u'@'h'", "/*", "--", "@@global."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		a, b := Classify(sql, 0), Classify(sql, ModeNoBackslashEscapes)
		_ = b
		if a != Classify(sql, 0) {
			t.Fatal("not deterministic")
		}
	})
}
