package router

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		sql     string
		kind    Kind
		keyword string
		sticky  bool
		lastID  bool
	}{
		{"SELECT 1", KindRead, "SELECT", false, false},
		{"  /* c */ select c from sbtest1 where id=5", KindRead, "SELECT", false, false},
		{"-- note\nSELECT 1", KindRead, "SELECT", false, false},
		{"# note\nSELECT 1", KindRead, "SELECT", false, false},
		{"(SELECT 1) UNION (SELECT 2)", KindRead, "SELECT", false, false},
		{"/*!40101 SET NAMES utf8 */", KindOther, "SET", true, false},
		{"/*M!100000 SET @x=1 */", KindOther, "SET", true, false},
		{"select @@version_comment limit 1", KindRead, "SELECT", false, false},
		{"select @a", KindRead, "SELECT", false, false}, // reading: the session carries user variables
		{"select @`a b`", KindRead, "SELECT", false, false},
		{"select @a := 1", KindRead, "SELECT", true, false},
		{"select 1 into @a", KindRead, "SELECT", true, false},
		{"select c from t into   @a, @b", KindRead, "SELECT", true, false},
		{"insert into t values (@a)", KindWrite, "INSERT", false, false},
		{"SET autocommit=0", KindOther, "SET", true, false},
		{"insert into t values (1)", KindWrite, "INSERT", false, false},
		{"SELECT LAST_INSERT_ID()", KindRead, "SELECT", false, true},
		{"select sql_calc_found_rows * from t limit 1", KindRead, "SELECT", true, false},
		{"SELECT GET_LOCK('a', 1)", KindRead, "SELECT", true, false},
		{"create temporary table x (a int)", KindDDL, "CREATE", true, false},
		{"create table x (a int)", KindDDL, "CREATE", false, false},
		{"BEGIN", KindTxn, "BEGIN", false, false},
		{"start transaction read only", KindTxn, "START", false, false},
		{"START SLAVE", KindOther, "START", true, false},
		{"commit", KindTxn, "COMMIT", false, false},
		{"LOCK TABLES t WRITE", KindOther, "LOCK", true, false},
		{"PREPARE s FROM 'select 1'", KindOther, "PREPARE", true, false},
		{"USE db", KindOther, "USE", true, false},
		{"KILL QUERY 5", KindKill, "KILL", false, false},
		{"", KindEmpty, "", false, false},
		{"  ;  ", KindEmpty, "", false, false},
		{"/* only a comment */", KindEmpty, "", false, false},
		{"/* unterminated", KindEmpty, "", false, false},
		{"--", KindEmpty, "", false, false},
	}
	for _, tt := range tests {
		st := Classify(tt.sql)
		if st.Kind != tt.kind || st.Keyword != tt.keyword || st.Sticky != tt.sticky || st.UsesLastInsertID != tt.lastID {
			t.Errorf("Classify(%q) = %+v, want kind %d keyword %q sticky %v lastID %v", tt.sql, st, tt.kind, tt.keyword, tt.sticky, tt.lastID)
		}
	}
}

func TestParseKill(t *testing.T) {
	tests := []struct {
		sql string
		ok  bool
		k   Kill
	}{
		{"KILL 12", true, Kill{ID: 12}},
		{"kill query 7;", true, Kill{ID: 7, Query: true}},
		{"KILL CONNECTION 9", true, Kill{ID: 9}},
		{"KILL HARD QUERY 3", true, Kill{ID: 3, Query: true}},
		{"KILL CONNECTION_ID()", true, Kill{Self: true}},
		{"kill query connection_id( )", true, Kill{Query: true, Self: true}},
		{"KILL QUERY ID 3", false, Kill{}},
		{"KILL USER bob", true, Kill{User: "bob", SQL: "KILL USER bob"}},
		{"KILL HARD QUERY USER 'bob'@'%'", true, Kill{Query: true, User: "'bob'@'%'", SQL: "KILL HARD QUERY USER 'bob'@'%'"}},
		{"KILL USER", false, Kill{}},
		{"KILL 99999999999", false, Kill{}},
		{"SELECT 1", false, Kill{}},
	}
	for _, tt := range tests {
		k, ok := ParseKill(tt.sql)
		if ok != tt.ok || k != tt.k {
			t.Errorf("ParseKill(%q) = %+v, %v; want %+v, %v", tt.sql, k, ok, tt.k, tt.ok)
		}
	}
}

func TestIsShowProcesslist(t *testing.T) {
	for sql, want := range map[string][2]bool{
		"SHOW PROCESSLIST":       {false, true},
		"show full processlist;": {true, true},
		"SHOW PROCESSLIST x":     {false, false},
		"SHOW TABLES":            {false, false},
	} {
		full, ok := IsShowProcesslist(sql)
		if full != want[0] || ok != want[1] {
			t.Errorf("IsShowProcesslist(%q) = %v, %v; want %v", sql, full, ok, want)
		}
	}
}

func BenchmarkClassify(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Classify("SELECT c FROM sbtest1 WHERE id=4821")
	}
}

func TestParseSetOff(t *testing.T) {
	for sql, want := range map[string]bool{
		"SET autocommit=1": false, "SET autocommit = ON": false, "set @@session.autocommit := 'on'": false,
		"SET autocommit=0": true, "SET AUTOCOMMIT = OFF": true, "SET @@autocommit=false": true, "SET autocommit = 'Off'": true,
		"SET autocommit = @x": false, "SET autocommit = DEFAULT": false,
	} {
		vars, ok := ParseSet(sql, 0)
		if !ok || len(vars) != 1 {
			t.Fatalf("ParseSet(%q) = %v, %v", sql, vars, ok)
		}
		if vars[0].Off != want {
			t.Errorf("ParseSet(%q): Off = %v, want %v", sql, vars[0].Off, want)
		}
	}
}
