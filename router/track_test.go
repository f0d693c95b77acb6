package router

import "testing"

func TestSetsTrackers(t *testing.T) {
	for _, c := range []struct {
		sql       string
		only, any bool
	}{
		{"SET session_track_schema = OFF", true, true},
		{"SET @@session.session_track_system_variables = 'time_zone'", true, true},
		{"set local session_track_state_change=1, SESSION session_track_transaction_info = STATE", true, true},
		{"SET @@SESSION_TRACK_SCHEMA = DEFAULT", true, true},
		{"SET GLOBAL session_track_schema = OFF", false, false},
		{"SET @@global.session_track_system_variables = ''", false, false},
		{"SET session_track_schema = OFF, sql_mode = ''", false, true},
		{"SET @a = 1, @@session_track_state_change = 1", false, true},
		{"SET @session_track_schema = 1", false, false},
		{"SELECT @@session_track_schema", false, false},
	} {
		if only, any := SetsTrackers(c.sql, 0); only != c.only || any != c.any {
			t.Errorf("SetsTrackers(%q) = %v, %v, want %v, %v", c.sql, only, any, c.only, c.any)
		}
	}
}

func TestBindTrackers(t *testing.T) {
	value := func(name string) string { return "<" + name + ">" }
	for _, c := range []struct{ sql, want string }{
		{"SELECT @@session_track_schema", "SELECT <session_track_schema> AS `@@session_track_schema`"},
		{"select @@SESSION.Session_Track_System_Variables, @@local.session_track_state_change FROM dual",
			"select <session_track_system_variables> AS `@@SESSION.Session_Track_System_Variables`, <session_track_state_change> AS `@@local.session_track_state_change` FROM dual"},
		{"SELECT @@session_track_schema AS s", "SELECT <session_track_schema> AS s"},
		{"SELECT 1 + @@session_track_schema", "SELECT 1 + <session_track_schema>"},
		{"SELECT @@global.session_track_schema", "SELECT @@global.session_track_schema"},
		{"SET @saved = @@session_track_system_variables", "SET @saved = <session_track_system_variables>"},
		{"SET @@session_track_schema = @@session_track_state_change", "SET @@session_track_schema = <session_track_state_change>"},
		{"SELECT '@@session_track_schema', @@session_track_schema /* @@session_track_schema */",
			"SELECT '@@session_track_schema', <session_track_schema> AS `@@session_track_schema` /* @@session_track_schema */"},
		{"SELECT @@session_track_schema INTO @x", "SELECT <session_track_schema> AS `@@session_track_schema` INTO @x"},
	} {
		got, ok := BindTrackers(c.sql, 0, value)
		if !ok || got != c.want {
			t.Errorf("BindTrackers(%q) = %q, %v\nwant %q", c.sql, got, ok, c.want)
		}
	}
	if st := Classify("SELECT @@session_track_schema", 0); !st.ReadsTrackers {
		t.Error("Classify: a read of a tracker is not ReadsTrackers")
	}
	if st := Classify("SELECT @@global.session_track_schema", 0); st.ReadsTrackers {
		t.Error("Classify: a read of a tracker's global value is ReadsTrackers")
	}
}
