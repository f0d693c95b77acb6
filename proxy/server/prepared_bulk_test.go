package server_test

import (
	"encoding/binary"
	"testing"

	"github.com/shardgate/shardgate/mysql"
)

// bulkRows builds the parameter rows of a COM_STMT_BULK_EXECUTE from Go
// values: int64 as BIGINT, string as VARCHAR, nil as NULL (the first row
// gives the types).
func bulkRows(rows ...[]any) []mysql.StmtExecute {
	var out []mysql.StmtExecute
	var types []byte
	for _, vals := range rows {
		e := mysql.StmtExecute{Null: make([]bool, len(vals)), Values: make([][]byte, len(vals))}
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				e.Null[i] = true
			case int64:
				e.Values[i] = binary.LittleEndian.AppendUint64(nil, uint64(v))
			case string:
				e.Values[i] = append(mysql.AppendLenEncInt(nil, uint64(len(v))), v...)
			}
		}
		if types == nil {
			for _, v := range vals {
				switch v.(type) {
				case string:
					types = append(types, mysql.TypeVarString, 0)
				default:
					types = append(types, mysql.TypeLongLong, 0)
				}
			}
		}
		e.Types = types
		out = append(out, e)
	}
	return out
}

// bulk runs q prepared with COM_STMT_BULK_EXECUTE over rows and returns
// the OK's affected rows and insert id, or the ERR.
func (r *rawConn) bulk(q string, rows []mysql.StmtExecute) (mysql.OK, *mysql.SQLError) {
	r.t.Helper()
	id, resp := r.prepare(q)
	if id == 0 {
		r.t.Fatalf("prepare %s: %s", q, describe(resp[0]))
	}
	defer r.command(binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtClose}, id))
	r.command(mysql.AppendStmtBulkExecute(nil, id, rows))
	p := r.read()
	if len(p) > 0 && p[0] == mysql.ErrHeader {
		return mysql.OK{}, mysql.ParseErr(p)
	}
	ok, err := mysql.ParseOK(p)
	if err != nil {
		r.t.Fatalf("bulk %s: %s", q, describe(p))
	}
	return ok, nil
}

// TestPreparedBulkExecute: COM_STMT_BULK_EXECUTE (MariaDB's array
// binding) runs each parameter row where its values route it: inserts,
// updates and deletes of a sharded table spread over both nodes, of an
// unsharded table on the default node, inside a transaction (rolled back
// whole) and outside; one OK adds up the rows; the first failing row's
// error stops it; statements MariaDB does not run in bulk get 1295, an
// unknown id 1243, DEFAULT/IGNORE indicators 1235, and the connection
// stays usable.
func TestPreparedBulkExecute(t *testing.T) {
	p := budgetProxy(t, nil)
	r := dialRaw(t, p.addr)
	r.loginDB("txn_t", rawCaps)
	count := func(q string) string {
		t.Helper()
		rows, e := r.query(q)
		if e != nil || len(rows) != 1 {
			t.Fatalf("%s: %v %v", q, rows, e)
		}
		return rows[0][0]
	}
	ok, e := r.bulk("INSERT INTO acct (id, balance) VALUES (?, ?)", bulkRows(
		[]any{int64(101), int64(1)}, []any{int64(102), int64(2)}, []any{int64(103), int64(3)}, []any{int64(104), int64(4)}))
	if e != nil || ok.AffectedRows != 4 {
		t.Fatalf("sharded insert: %+v %v", ok, e)
	}
	if got := count("SELECT COUNT(*), SUM(balance) FROM acct WHERE id > 100"); got != "4" {
		t.Errorf("rows inserted: %s", got)
	}
	// Each row reached its own subtable (the point reads route by id).
	for id, want := range map[string]string{"101": "1", "102": "2", "103": "3", "104": "4"} {
		if got := count("SELECT balance FROM acct WHERE id = " + id); got != want {
			t.Errorf("id %s: %s, want %s", id, got, want)
		}
	}
	ok, e = r.bulk("UPDATE acct SET balance = ? WHERE id = ?", bulkRows(
		[]any{int64(10), int64(101)}, []any{int64(20), int64(102)}, []any{int64(30), int64(999)}))
	if e != nil || ok.AffectedRows != 2 {
		t.Errorf("sharded update: %+v %v", ok, e)
	}
	ok, e = r.bulk("INSERT INTO plain (id, note) VALUES (?, ?)", bulkRows([]any{int64(11), "a"}, []any{int64(12), nil}))
	if e != nil || ok.AffectedRows != 2 || count("SELECT COUNT(*) FROM plain WHERE id > 10 AND note IS NULL") != "1" {
		t.Errorf("unsharded insert: %+v %v", ok, e)
	}
	// The second row is a duplicate: none stays, as on MariaDB
	// (TestPreparedBulkExecuteDirect), outside a transaction and inside.
	_, e = r.bulk("INSERT INTO acct (id, balance) VALUES (?, ?)", bulkRows(
		[]any{int64(105), int64(5)}, []any{int64(101), int64(5)}, []any{int64(106), int64(6)}))
	if e == nil || e.Code != 1062 {
		t.Errorf("duplicate row: %v, want 1062", e)
	}
	if got := count("SELECT COUNT(*) FROM acct WHERE id IN (105, 106)"); got != "0" {
		t.Errorf("rows of the failed bulk: %s, want 0", got)
	}
	if _, e := r.query("BEGIN"); e != nil {
		t.Fatal(e)
	}
	if _, e := r.query("INSERT INTO acct VALUES (105, 5)"); e != nil {
		t.Fatal(e)
	}
	_, e = r.bulk("INSERT INTO acct (id, balance) VALUES (?, ?)", bulkRows([]any{int64(106), int64(6)}, []any{int64(102), int64(5)}))
	if e == nil || e.Code != 1062 {
		t.Errorf("duplicate row in a transaction: %v, want 1062", e)
	}
	if got := count("SELECT COUNT(*) FROM acct WHERE id IN (105, 106)"); got != "1" {
		t.Errorf("rows in the transaction after a failed bulk: %s, want 1 (the INSERT before it)", got)
	}
	ok, e = r.bulk("DELETE FROM acct WHERE id = ?", bulkRows([]any{int64(101)}, []any{int64(102)}, []any{int64(103)}))
	if e != nil || ok.AffectedRows != 3 {
		t.Errorf("delete in a transaction: %+v %v", ok, e)
	}
	if _, e := r.query("ROLLBACK"); e != nil {
		t.Fatal(e)
	}
	if got := count("SELECT COUNT(*) FROM acct WHERE id > 100"); got != "4" {
		t.Errorf("after ROLLBACK: %s rows, want 4", got)
	}
	if _, e = r.bulk("SELECT balance FROM acct WHERE id = ?", bulkRows([]any{int64(1)})); e == nil || e.Code != 1295 {
		t.Errorf("bulk SELECT: %v, want 1295", e)
	}
	r.command(mysql.AppendStmtBulkExecute(nil, 12345, bulkRows([]any{int64(1)})))
	r.expectErr(1243)
	id, _ := r.prepare("INSERT INTO acct (id, balance) VALUES (?, ?)")
	pkt := mysql.AppendStmtBulkExecute(nil, id, bulkRows([]any{int64(107), int64(7)}))
	pkt[len(pkt)-9] = mysql.IndicatorDefault // the second value: DEFAULT
	r.command(pkt[:len(pkt)-8])
	r.expectErr(1235)
	if got := count("SELECT COUNT(*) FROM acct WHERE id > 100"); got != "4" {
		t.Errorf("at the end: %s rows, want 4", got)
	}
}

// TestPreparedBulkExecuteDirect: what MariaDB itself does with the bulk
// that fails on its second row outside a transaction, the behaviour the
// proxy follows (TestPreparedBulkExecute): the rows before the failing
// one stay.
func TestPreparedBulkExecuteDirect(t *testing.T) {
	s := backends(t)[0]
	r := dialRaw(t, s.Addr)
	caps := rawCaps&^mysql.ClientLongPassword | mysql.ClientConnectWithDB
	resp := mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{Capabilities: caps, MaxPacket: mysql.MaxPacketPayload,
		Charset: 45, User: s.User, AuthResponse: mysql.ScrambleNative(r.hs.Salt, s.Password), Database: "mysql", AuthPlugin: mysql.AuthNativePassword})
	binary.LittleEndian.PutUint32(resp[28:32], mysql.MariaDBClientStmtBulkOperations) // extended capabilities
	r.caps = caps
	r.write(resp)
	r.expectOK()
	for _, q := range []string{"DROP DATABASE IF EXISTS bulk_d", "CREATE DATABASE bulk_d", "USE bulk_d", "CREATE TABLE t (id INT PRIMARY KEY, v INT)"} {
		if _, e := r.query(q); e != nil {
			t.Fatalf("%s: %v", q, e)
		}
	}
	defer r.query("DROP DATABASE bulk_d")
	_, e := r.bulk("INSERT INTO t (id, v) VALUES (?, ?)", bulkRows([]any{int64(1), int64(1)}, []any{int64(2), int64(2)}))
	if e != nil {
		t.Fatal(e)
	}
	_, e = r.bulk("INSERT INTO t (id, v) VALUES (?, ?)", bulkRows([]any{int64(5), int64(5)}, []any{int64(1), int64(5)}, []any{int64(6), int64(6)}))
	if e == nil || e.Code != 1062 {
		t.Errorf("duplicate row: %v, want 1062", e)
	}
	rows, _ := r.query("SELECT COUNT(*) FROM t WHERE id IN (5, 6)")
	if len(rows) != 1 || rows[0][0] != "0" {
		t.Errorf("rows of the failed bulk on MariaDB: %v, want 0", rows)
	}
	r.query("BEGIN")
	r.query("INSERT INTO t VALUES (3, 3)")
	_, e = r.bulk("INSERT INTO t (id, v) VALUES (?, ?)", bulkRows([]any{int64(5), int64(5)}, []any{int64(1), int64(5)}))
	if e == nil || e.Code != 1062 {
		t.Errorf("duplicate row in a transaction: %v, want 1062", e)
	}
	r.query("COMMIT")
	rows, _ = r.query("SELECT GROUP_CONCAT(id ORDER BY id) FROM t")
	if len(rows) != 1 || rows[0][0] != "1,2,3" {
		t.Errorf("rows after a failed bulk in a transaction on MariaDB: %v, want 1,2,3", rows)
	}
}
