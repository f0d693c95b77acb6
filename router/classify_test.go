package router

import "testing"

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
		{"KILL QUERY ID 3", true, Kill{ID: 3, Query: true, QueryID: true}},
		{"kill soft query id @id", true, Kill{Query: true, QueryID: true, Expr: "@id"}},
		{"KILL QUERY ID user 'foo'", true, Kill{Query: true, QueryID: true, Expr: "user 'foo'"}},
		{"KILL QUERY ID CONNECTION_ID()", true, Kill{Query: true, QueryID: true, Expr: "CONNECTION_ID()"}},
		{"KILL 1+1", true, Kill{Expr: "1+1"}},
		{"KILL (SELECT 1) ;", true, Kill{Expr: "(SELECT 1)"}},
		{"KILL CONNECTION @x", true, Kill{Expr: "@x"}},
		{"KILL (user)", true, Kill{Expr: "(user)"}},
		{"KILL", false, Kill{}},
		{"KILL QUERY ID", false, Kill{}},
		{"KILL USER bob", true, Kill{User: "bob", SQL: "KILL USER bob"}},
		{"KILL HARD QUERY USER 'bob'@'%'", true, Kill{Query: true, User: "'bob'@'%'", SQL: "KILL HARD QUERY USER 'bob'@'%'"}},
		{"KILL USER", false, Kill{}},
		{"KILL 99999999999", true, Kill{ID: 99999999999}},
		{"KILL 99999999999999999999", true, Kill{Expr: "99999999999999999999"}},
		{"SELECT 1", false, Kill{}},
	}
	for _, tt := range tests {
		k, ok := ParseKill(tt.sql)
		if ok && tt.k.SQL == "" {
			tt.k.SQL = tt.sql
		}
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
