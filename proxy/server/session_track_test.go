package server_test

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/shardgate/shardgate/mysql"
)

// trackCommand is one command of a session-tracking comparison.
type trackCommand struct {
	name string
	cmd  []byte
	// values: a read of the trackers, whose values (not column
	// definitions) must be MariaDB's.
	values bool
}

// sameTracked compares a response through the proxy with MariaDB's:
// byte for byte, except that the system variables one OK reports may
// come in another order (MariaDB orders them by a hash of its own), and
// that only the rows of a read of the trackers are compared.
func sameTracked(t *testing.T, c trackCommand, got, want [][]byte) {
	t.Helper()
	norm := func(ps [][]byte) [][]byte {
		out := make([][]byte, 0, len(ps))
		for i, p := range ps {
			if c.values && i > 0 && i < len(ps)-1 && len(p) > 4 && string(p[:4]) == "\x03def" {
				continue // a column definition
			}
			if len(p) > 0 && p[0] == mysql.OKHeader {
				if ok, state, err := mysql.ParseOKTracked(p); err == nil && state != nil {
					changes, _ := mysql.ParseStateChanges(state)
					slices.SortStableFunc(changes, func(a, b mysql.StateChange) int {
						if a.Type != mysql.TrackSystemVariables || b.Type != mysql.TrackSystemVariables {
							return 0
						}
						return slices.Compare(a.Data, b.Data)
					})
					var st []byte
					for _, ch := range changes {
						st = mysql.AppendStateChange(st, ch.Type, ch.Data)
					}
					p = mysql.AppendOKTracked(nil, p[0], ok, st)
				}
			}
			out = append(out, p)
		}
		return out
	}
	samePackets(t, c.name, norm(got), norm(want))
}

func trackQuery(q string) trackCommand {
	return trackCommand{name: q, cmd: append([]byte{mysql.ComQuery}, q...)}
}

func trackValues(q string) trackCommand {
	c := trackQuery(q)
	c.values = true
	return c
}

// TestSessionTrackClient: a client with CLIENT_SESSION_TRACK gets in its
// OK packets exactly the session state information MariaDB sends it
// directly, for the trackers it set itself (in several spellings) and the
// server's defaults, whatever the proxy tracks for itself on its backend
// connections: system variables set by SET (tracked by the proxy or not)
// and SET NAMES, the schema after USE, COM_INIT_DB and EXECUTE IMMEDIATE
// 'USE db', state changes, the transaction's state; reads of the trackers
// give the client's values (mtr main.mysqltest_tracking_info,
// main.mysql-interactive).
func TestSessionTrackClient(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "track_a", "track_b")
	cmds := []trackCommand{
		// The server's defaults (autocommit, the character sets,
		// time_zone; the schema).
		trackQuery("SET NAMES utf8"),
		trackQuery("SET NAMES latin1 COLLATE latin1_bin"),
		trackQuery("SET character_set_results = utf8mb4"),
		trackQuery("SET time_zone = '+01:00', sql_mode = ''"),
		trackQuery("SET autocommit = 0"),
		trackQuery("SET autocommit = 1"),
		trackQuery("USE track_b"),
		{name: "COM_INIT_DB track_a", cmd: append([]byte{mysql.ComInitDB}, "track_a"...)},
		trackQuery("EXECUTE IMMEDIATE 'USE track_b'"),
		trackQuery("EXECUTE IMMEDIATE CONCAT('USE ', 'track_a')"),
		trackQuery("SELECT 1"),
		trackQuery("SET @u = 1"),
		// The client's own trackers, in several spellings.
		trackQuery("SET @@session.session_track_system_variables = 'character_set_connection'"),
		trackValues("SELECT @@session_track_system_variables, @@SESSION.session_track_schema, @@local.session_track_state_change, @@session_track_transaction_info"),
		trackValues("SELECT @@session_track_system_variables AS v, 1 + @@session_track_schema x, CONCAT(@@local.session_track_system_variables, '!')"),
		trackQuery("SET @saved = @@session_track_system_variables"),
		trackQuery("SELECT @saved"),
		trackQuery("SET NAMES utf8"),
		trackQuery("SET NAMES big5"),
		trackQuery("SET time_zone = '+02:00'"),
		trackQuery("SET SESSION session_track_system_variables = 'optimizer_switch,time_zone', session_track_state_change = ON"),
		trackQuery("SET optimizer_switch = 'index_merge=off'"),
		trackQuery("SET time_zone = '+03:00', sql_mode = 'ANSI'"),
		trackQuery("SET @v = 2"),
		trackQuery("USE track_b"),
		trackQuery("SET session_track_schema = OFF"),
		trackQuery("USE track_a"),
		trackQuery("SET LOCAL session_track_system_variables = '*'"),
		trackQuery("SET sql_mode = DEFAULT"),
		trackQuery("SET NAMES utf8mb4"),
		trackQuery("SET @@session_track_transaction_info = 'STATE'"),
		trackQuery("SET session_track_system_variables = NULL"),
		trackQuery("SET session_track_system_variables = 'no_such_variable'"),
		trackValues("SELECT @@session_track_system_variables, @@session_track_transaction_info"),
		trackQuery("BEGIN"),
		trackQuery("SELECT 1"),
		trackQuery("COMMIT"),
		trackQuery("START TRANSACTION"),
		trackQuery("ROLLBACK"),
		trackQuery("COMMIT"),
		trackQuery("SET session_track_system_variables = DEFAULT, session_track_schema = DEFAULT, session_track_state_change = DEFAULT, session_track_transaction_info = DEFAULT"),
		trackValues("SELECT @@session.session_track_system_variables, @@global.session_track_system_variables"),
		trackQuery("SET NAMES latin1"),
		trackQuery("SET session_track_system_variables = 'character_set_results,time_zone,character_set_client', session_track_state_change = 1"),
		trackQuery("SET NAMES utf8"),
		trackQuery("SET time_zone = '+04:00', character_set_client = latin1, character_set_results = latin1"),
		trackQuery("SET character_set_client = latin1, time_zone = '+05:00', character_set_results = latin1"),
		trackQuery("SET session_track_system_variables = DEFAULT, session_track_state_change = DEFAULT"),
		trackQuery("SET NAMES latin1"),
		// A SET of trackers and other variables at once.
		trackQuery("SET @m = 5, session_track_state_change = ON, sql_mode = 'ANSI', session_track_system_variables = 'sql_mode'"),
		trackQuery("SELECT @m, @@sql_mode"),
		trackQuery("SET sql_mode = DEFAULT"),
		trackQuery("SET session_track_system_variables = DEFAULT, session_track_state_change = DEFAULT, @m = NULL"),
		trackQuery("SET NAMES latin1"),
		// EXECUTE IMMEDIATE of a literal in a character set other than
		// the connection's (mtr main.ctype_sjis).
		trackQuery("SET NAMES sjis"),
		trackQuery("SET @@character_set_client = 'cp1257'"),
		trackQuery("EXECUTE IMMEDIATE _cp1257 0xD182"),
		trackQuery("SET NAMES latin1"),
	}
	for _, variant := range rawEOFVariants {
		t.Run(variant.name, func(t *testing.T) {
			d, pr := rawPair(t, s, p, "track_a", variant.caps|mysql.ClientSessionTrack)
			for _, c := range cmds {
				d.command(c.cmd)
				want := d.response(false)
				pr.command(c.cmd)
				sameTracked(t, c, pr.response(false), want)
			}
		})
	}
	// A client without CLIENT_SESSION_TRACK gets nothing of it, whatever
	// trackers it sets.
	t.Run("untracked", func(t *testing.T) {
		d, pr := rawPair(t, s, p, "track_a", rawCaps)
		for _, c := range cmds {
			d.command(c.cmd)
			want := d.response(false)
			pr.command(c.cmd)
			sameTracked(t, c, pr.response(false), want)
		}
	})
	// Prepared statements (the binary protocol): what their execution
	// changes is reported as for a text statement.
	t.Run("prepared", func(t *testing.T) {
		d, pr := rawPair(t, s, p, "track_a", rawCaps|mysql.ClientSessionTrack)
		for _, q := range []string{
			"SET time_zone = '+06:00'",
			"SET NAMES utf8",
			"SET @@session.session_track_system_variables = 'time_zone,sql_mode'",
			"SET session_track_state_change = ON",
			"SET sql_mode = 'ANSI_QUOTES'",
			"SET time_zone = '+07:00'",
			"SET @w = 3",
			"SELECT @@session_track_system_variables",
			"SET session_track_system_variables = DEFAULT, session_track_state_change = DEFAULT",
			"SET sql_mode = DEFAULT, time_zone = DEFAULT",
		} {
			exec := func(r *rawConn) [][]byte {
				id, out := r.prepare(q)
				if id == 0 {
					return out
				}
				b := binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtExecute}, id)
				b = append(b, 0, 1, 0, 0, 0)
				r.command(b)
				out = r.response(false)
				r.command(binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtClose}, id))
				return out
			}
			c := trackQuery(q)
			c.values = true
			want := exec(d)
			sameTracked(t, c, exec(pr), want)
		}
	})
	// The login's OK reports the schema the client logged in to, to a
	// client that tracks it.
	t.Run("login", func(t *testing.T) {
		for _, caps := range []uint32{rawCaps | mysql.ClientSessionTrack, rawCaps} {
			for _, db := range []string{"track_b", ""} {
				d := dialRaw(t, s.Addr)
				d.sendHandshakeResponse(s.User, s.Password, db, caps)
				pr := dialRaw(t, p.addr)
				pr.sendHandshakeResponse(appUser, appPassword, db, caps)
				samePackets(t, "login to "+db, [][]byte{pr.read()}, [][]byte{d.read()})
			}
		}
	})
	// New sessions start with the server's globals, changed through the
	// proxy a moment before (mtr main.mysqltest_tracking_info).
	t.Run("global", func(t *testing.T) {
		cfg := newConfig(t, s)
		cfg.DenyStatements = nil
		p := startProxy(t, cfg)
		admin, _ := rawPair(t, s, p, "", rawCaps|mysql.ClientSessionTrack)
		t.Cleanup(func() {
			admin.command(append([]byte{mysql.ComQuery}, "SET GLOBAL session_track_system_variables = DEFAULT"...))
			admin.response(false)
		})
		_, pr := rawPair(t, s, p, "", rawCaps|mysql.ClientSessionTrack)
		pr.command(append([]byte{mysql.ComQuery}, "SET GLOBAL session_track_system_variables = 'character_set_connection'"...))
		if out := pr.response(false); len(out) != 1 || out[0][0] != mysql.OKHeader {
			t.Fatalf("SET GLOBAL: %x", out)
		}
		d, pr := rawPair(t, s, p, "track_a", rawCaps|mysql.ClientSessionTrack)
		for _, c := range []trackCommand{trackQuery("SET NAMES utf8"), trackQuery("SET NAMES big5"),
			trackValues("SELECT @@session_track_system_variables"), trackQuery("SET NAMES latin1")} {
			d.command(c.cmd)
			want := d.response(false)
			pr.command(c.cmd)
			sameTracked(t, c, pr.response(false), want)
		}
	})
}
