package server_test

import (
	"testing"

	"github.com/shardgate/shardgate/mysql"
)

// TestSessionTrackRoutine (issue 32): a stored procedure that sets the
// session's trackers sets the client's, as on MariaDB: what later
// statements report and what reads of the trackers give are MariaDB's
// (they were the trackers from before the CALL, and the procedure had
// left the backend connection with the client's trackers instead of the
// proxy's). The CALL's own OK is not compared: it is filtered through
// the trackers as they were before it (see afterRoutine).
func TestSessionTrackRoutine(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "trk_s")
	direct := openDB(t, directDSN(s, "trk_s", ""))
	mustExec(t, direct, "CREATE PROCEDURE set_trackers() SET session_track_system_variables = 'time_zone', session_track_state_change = ON",
		"CREATE PROCEDURE tz() SET time_zone = '+03:00'",
		"CREATE PROCEDURE reset_trackers() BEGIN SET session_track_system_variables = DEFAULT; SET session_track_state_change = DEFAULT; END")
	for _, variant := range rawEOFVariants {
		t.Run(variant.name, func(t *testing.T) {
			d, pr := rawPair(t, s, p, "trk_s", variant.caps|mysql.ClientSessionTrack)
			call := func(q string) {
				t.Helper()
				for _, r := range []*rawConn{d, pr} {
					r.command(append([]byte{mysql.ComQuery}, q...))
					if out := r.response(false); len(out) != 1 || out[0][0] != mysql.OKHeader {
						t.Fatalf("%s: %q", q, out)
					}
				}
			}
			call("CALL set_trackers()")
			trackCompare(t, d, pr, []trackCommand{
				trackValues("SELECT @@session_track_system_variables, @@session_track_state_change"),
				trackQuery("SET time_zone = '+04:00'"),
				trackQuery("CALL tz()"),
				trackQuery("SET @x = 3"),
				trackQuery("SET character_set_results = latin1"),
			})
			call("CALL reset_trackers()")
			trackCompare(t, d, pr, []trackCommand{
				trackValues("SELECT @@session_track_system_variables, @@session_track_state_change"),
				trackQuery("SET time_zone = DEFAULT"),
				trackQuery("SET @x = 4"),
				trackQuery("SET character_set_results = DEFAULT"),
			})
		})
	}
}

// TestSessionTrackSetStatement (issue 32): SET STATEMENT ... FOR that
// sets the client's trackers for one statement: what the statement
// reports, and what it reads of them, are MariaDB's (the proxy filtered
// the report through the client's trackers as they are outside the
// statement, and bound the reads to those), and the statements after it
// have the client's trackers again.
func TestSessionTrackSetStatement(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "trk_st")
	for _, variant := range rawEOFVariants {
		t.Run(variant.name, func(t *testing.T) {
			d, pr := rawPair(t, s, p, "trk_st", variant.caps|mysql.ClientSessionTrack)
			trackCompare(t, d, pr, []trackCommand{
				trackQuery("SET STATEMENT session_track_system_variables = 'time_zone' FOR SET time_zone = '+01:00'"),
				trackQuery("SET time_zone = '+02:00'"),
				trackQuery("SET STATEMENT session_track_system_variables = 'sql_mode' FOR SET sql_mode = 'ANSI', time_zone = '+05:00'"),
				trackQuery("SET sql_mode = DEFAULT"),
				trackQuery("SET STATEMENT session_track_state_change = ON FOR SET @x = 1"),
				trackQuery("SET @x = 2"),
				trackValues("SET STATEMENT session_track_schema = OFF FOR SELECT @@session_track_schema, @@session_track_system_variables"),
				trackQuery("SET STATEMENT max_statement_time = 10, @@session.session_track_schema = OFF FOR USE trk_st"),
				trackQuery("USE trk_st"),
				trackQuery("SET STATEMENT session_track_transaction_info = 'STATE' FOR BEGIN"),
				trackQuery("COMMIT"),
				trackValues("SELECT @@session_track_schema, @@session_track_state_change, @@session_track_transaction_info"),
				trackQuery("SET time_zone = DEFAULT"),
			})
		})
	}
}

// TestSessionTrackSQLPrepareRead (issue 32): PREPARE ... FROM of a read
// of the client's trackers, executed after SETs of them, gives their
// values at each EXECUTE, as on MariaDB (it ran on the backend, which
// answered its own trackers: *, 1, 1).
func TestSessionTrackSQLPrepareRead(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "trk_sp")
	const read = "SELECT @@session_track_system_variables, @@session_track_schema, @@session_track_state_change"
	for _, variant := range rawEOFVariants {
		t.Run(variant.name, func(t *testing.T) {
			d, pr := rawPair(t, s, p, "trk_sp", variant.caps|mysql.ClientSessionTrack)
			trackCompare(t, d, pr, []trackCommand{
				trackQuery("PREPARE r FROM '" + read + "'"),
				trackValues("EXECUTE r"),
				trackQuery("SET session_track_system_variables = 'time_zone', session_track_schema = OFF"),
				trackValues("EXECUTE r"),
				trackQuery("SET session_track_state_change = ON"),
				trackValues("EXECUTE r"),
				trackQuery("SET @q = 'SELECT @@session_track_state_change + 1'"),
				trackQuery("PREPARE r2 FROM @q"),
				trackValues("EXECUTE r2"),
				trackQuery("DEALLOCATE PREPARE r2"),
				trackQuery("SET session_track_system_variables = DEFAULT, session_track_schema = DEFAULT, session_track_state_change = DEFAULT"),
				trackValues("EXECUTE r"),
				trackQuery("DEALLOCATE PREPARE r"),
			})
		})
	}
}
