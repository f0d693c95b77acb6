package router

import "testing"

// TestStatementSetsTrackers: SET STATEMENT ... FOR with a tracker among
// its assignments, in several spellings, and texts that are not.
func TestStatementSetsTrackers(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SET STATEMENT session_track_state_change = ON FOR SET @x = 1", true},
		{"set statement max_statement_time = 1, SESSION_TRACK_SCHEMA = OFF for select 1", true},
		{"SET STATEMENT @@session_track_system_variables = 'time_zone' FOR SET time_zone = '+01:00'", true},
		{"SET STATEMENT @@session.session_track_transaction_info = STATE FOR BEGIN", true},
		{"/* c */ SET /*!100300 STATEMENT session_track_schema = 0 FOR */ SELECT 1", true},
		{"SET STATEMENT max_statement_time = 1 FOR SELECT @@session_track_schema", false},
		{"SET STATEMENT sql_mode = 'session_track_schema' FOR SELECT 1", false},
		{"SET STATEMENT max_statement_time = (SELECT 1), sql_mode = '' FOR SET session_track_schema = 0", false},
		{"SET STATEMENT @@global.session_track_schema = 0 FOR SELECT 1", false},
		{"SET session_track_schema = 0", false},
		{"SELECT 1", false},
	} {
		if got := StatementSetsTrackers(tc.sql, 0); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.sql, got, tc.want)
		}
	}
}
