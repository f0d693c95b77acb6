package server_test

import (
	"encoding/binary"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// trackCompare runs cmds on a direct connection and through the proxy
// and compares the answers (sameTracked).
func trackCompare(t *testing.T, d, pr *rawConn, cmds []trackCommand) {
	t.Helper()
	trackCompareWith(t, d, pr, cmds, nil)
}

// trackCompareWith is trackCompare with both answers passed through norm
// first (nil: as they are).
func trackCompareWith(t *testing.T, d, pr *rawConn, cmds []trackCommand, norm func([][]byte) [][]byte) {
	t.Helper()
	if norm == nil {
		norm = func(ps [][]byte) [][]byte { return ps }
	}
	for _, c := range cmds {
		d.command(c.cmd)
		want := norm(d.response(false))
		pr.command(c.cmd)
		sameTracked(t, c, norm(pr.response(false)), want)
	}
}

// trackOnly keeps of an OK packet what session tracking decides (the
// counts, the status flags but the optimizer's SERVER_QUERY_NO_INDEX_USED
// and SERVER_QUERY_NO_GOOD_INDEX_USED, the warnings, the session state
// information), without its info string: what a write on several shards
// says there ("Records: ...", "Rows matched: ...") and whether it used an
// index are not session tracking's.
func trackOnly(ps [][]byte) [][]byte {
	out := make([][]byte, len(ps))
	for i, p := range ps {
		out[i] = p
		if len(p) > 0 && p[0] == mysql.OKHeader {
			if ok, state, err := mysql.ParseOKTracked(p); err == nil {
				ok.Info = ""
				ok.Status &^= mysql.StatusNoGoodIndexUsed | mysql.StatusNoIndexUsed
				out[i] = mysql.AppendOKTracked(nil, p[0], ok, state)
			}
		}
	}
	return out
}

// TestSessionTrackWritesAcrossShards (issue 32): a write that reaches
// several nodes (a multi-row INSERT, an UPDATE or DELETE of every shard)
// inside a transaction reports the transaction's state to a client that
// tracks it as MariaDB does with all the rows (T___W___ after the first
// write, nothing for later ones), in an explicit transaction, with
// autocommit off, and mixed with single-shard writes before and after it;
// the characteristics too (CHARACTERISTICS).
func TestSessionTrackWritesAcrossShards(t *testing.T) {
	p, _ := txnProxy(t, config.TransactionMulti)
	s := backends(t)[0]
	dbSetup(t, s, "trk_d")
	direct := openDB(t, directDSN(s, "trk_d", ""))
	mustExec(t, direct, "CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)",
		"INSERT INTO acct (id, balance) VALUES (1,100),(2,100),(3,100),(4,100),(5,100),(6,100),(7,100),(8,100)")
	t.Cleanup(func() { direct.Exec("DROP DATABASE IF EXISTS trk_d") })
	for _, info := range []string{"STATE", "CHARACTERISTICS"} {
		for _, variant := range rawEOFVariants {
			t.Run(info+"/"+variant.name, func(t *testing.T) {
				caps := variant.caps | mysql.ClientSessionTrack
				d := dialRaw(t, s.Addr)
				d.sendHandshakeResponse(s.User, s.Password, "trk_d", caps)
				d.expectOK()
				pr := dialRaw(t, p.addr)
				pr.sendHandshakeResponse(appUser, appPassword, "txn_t", caps)
				pr.expectOK()
				trackCompareWith(t, d, pr, []trackCommand{
					trackQuery("SET session_track_transaction_info = '" + info + "'"),
					trackQuery("BEGIN"),
					trackQuery("INSERT INTO acct (id, balance) VALUES (11, 1), (12, 2), (13, 3), (14, 4)"),
					trackQuery("UPDATE acct SET balance = balance + 1"),
					trackQuery("UPDATE acct SET balance = balance + 1 WHERE id = 1"),
					trackQuery("DELETE FROM acct WHERE id > 10"),
					trackQuery("COMMIT"),
					// The first write of the transaction on one shard, then
					// on all.
					trackQuery("START TRANSACTION"),
					trackQuery("UPDATE acct SET balance = balance - 1 WHERE id = 2"),
					trackQuery("UPDATE acct SET balance = balance - 1 WHERE id IN (3, 4, 5, 6)"),
					trackQuery("ROLLBACK"),
					trackQuery("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
					trackQuery("START TRANSACTION"),
					trackQuery("UPDATE acct SET balance = balance - 1 WHERE id IN (3, 4, 5, 6)"),
					trackQuery("COMMIT"),
					trackQuery("START TRANSACTION READ ONLY"),
					trackQuery("COMMIT"),
					trackQuery("START TRANSACTION READ WRITE"),
					trackQuery("ROLLBACK"),
					trackQuery("START TRANSACTION WITH CONSISTENT SNAPSHOT"),
					trackQuery("COMMIT"),
					trackQuery("START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT"),
					trackQuery("COMMIT"),
					trackQuery("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ WRITE"),
					trackQuery("COMMIT"),
					trackQuery("SET autocommit = 0"),
					trackQuery("UPDATE acct SET balance = balance + 1 WHERE id IN (1, 2, 3, 4)"),
					trackQuery("INSERT INTO acct (id, balance) VALUES (21, 1), (22, 2)"),
					trackQuery("COMMIT"),
					trackQuery("DELETE FROM acct WHERE id > 20"),
					trackQuery("ROLLBACK"),
					trackQuery("SET autocommit = 1"),
					// Outside a transaction: nothing to report.
					trackQuery("UPDATE acct SET balance = balance + 1 WHERE id IN (1, 2, 3, 4)"),
					trackQuery("SET session_track_transaction_info = DEFAULT"),
				}, trackOnly)
			})
		}
	}
}

// TestSessionTrackPreparedRead (issue 32): a prepared statement (binary
// protocol) that reads the client's trackers gives their values when it
// executes, not when it was prepared, after a SET of them (text or
// prepared), with MariaDB's types (BIGINT for the booleans, where the
// values the proxy bound into the text were INT).
func TestSessionTrackPreparedRead(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "trk_p")
	d, pr := rawPair(t, s, p, "trk_p", rawCaps|mysql.ClientSessionTrack)
	const read = "SELECT @@session_track_system_variables, @@session_track_schema, @@session_track_state_change"
	dID, _ := d.prepare(read)
	pID, _ := pr.prepare(read)
	exec := func(r *rawConn, id uint32) [][]byte {
		b := binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtExecute}, id)
		b = append(b, 0, 1, 0, 0, 0)
		r.command(b)
		return r.response(false)
	}
	execBoth := func(what string) {
		t.Helper()
		want := exec(d, dID)
		c := trackValues(what)
		sameTracked(t, c, exec(pr, pID), want)
	}
	execBoth("prepared read, as prepared")
	trackCompare(t, d, pr, []trackCommand{
		trackQuery("SET session_track_system_variables = 'time_zone', session_track_schema = OFF"),
	})
	execBoth("prepared read after a SET of the trackers")
	// A prepared SET of them (the proxy's, like the text one).
	sID, _ := d.prepare("SET session_track_state_change = ON")
	exec(d, sID)
	sID, _ = pr.prepare("SET session_track_state_change = ON")
	exec(pr, sID)
	execBoth("prepared read after a prepared SET")
	trackCompare(t, d, pr, []trackCommand{
		trackQuery("SET session_track_system_variables = DEFAULT, session_track_schema = DEFAULT, session_track_state_change = DEFAULT"),
	})
	execBoth("prepared read after DEFAULT")
}
