package server_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// TestLongDataBudget: long data (COM_STMT_SEND_LONG_DATA) a session's
// statements hold for their next executions counts against
// packet_memory_total, whatever the number of statements and parameters:
// past it the execution gets 1041 and the data is dropped, the
// executions that fit run, and the memory comes back after an execution,
// a COM_STMT_RESET, a close, and when the client leaves.
func TestLongDataBudget(t *testing.T) {
	cfg := newConfig(t, backends(t)[0])
	cfg.PacketMemoryTotal = 2 << 20
	p := startProxy(t, cfg)
	r := dialRaw(t, p.addr)
	r.login(rawCaps)
	const chunk, chunks = 100 << 10, 7 // 700 KiB per statement
	var ids []uint32
	for range 4 {
		id, out := r.prepare("SELECT LENGTH(?)")
		if id == 0 {
			t.Fatalf("prepare: %x", out[0])
		}
		ids = append(ids, id)
	}
	send := func(id uint32) {
		for range chunks {
			r.command(stmtPacket(mysql.ComStmtSendLongData, id, append([]byte{0, 0}, bytes.Repeat([]byte{'x'}, chunk)...)...))
		}
	}
	// One parameter, bound now, type BLOB, its value sent as long data.
	exec := func(id uint32) [][]byte {
		r.command(stmtPacket(mysql.ComStmtExecute, id, 0, 1, 0, 0, 0, 0, 1, mysql.TypeBlob, 0))
		return r.response(false)
	}
	inUse := func() int64 { return p.srv.Stats().PacketMemoryInUse }
	for _, id := range ids[:3] {
		send(id) // the third passes 2 MiB
	}
	// Long data has no reply: a query after it has been read.
	if _, e := r.query("SELECT 1"); e != nil {
		t.Fatal(e)
	}
	if n := inUse(); n != 2*chunks*chunk {
		t.Fatalf("long data held: %d bytes, want %d (two statements' worth; the third's did not fit)", n, 2*chunks*chunk)
	}
	for i, id := range ids[:2] {
		if out := exec(id); out[0][0] == mysql.ErrHeader {
			t.Errorf("execution %d within the budget: %s", i, mysql.ParseErr(out[0]).Message)
		}
	}
	if out := exec(ids[2]); out[0][0] != mysql.ErrHeader || mysql.ParseErr(out[0]).Code != mysql.ErOutOfResources {
		t.Errorf("execution past packet_memory_total: %x, want ERR 1041", out[0][:min(len(out[0]), 16)])
	}
	if n := inUse(); n != 0 {
		t.Errorf("after the executions %d bytes are still held", n)
	}
	// Reset and close give it back too; so does leaving.
	send(ids[0])
	r.command(stmtPacket(mysql.ComStmtReset, ids[0]))
	r.expectOK()
	send(ids[1])
	r.command(stmtPacket(mysql.ComStmtClose, ids[1]))
	if _, e := r.query("SELECT 1"); e != nil {
		t.Fatal(e)
	}
	if n := inUse(); n != 0 {
		t.Errorf("after a reset and a close %d bytes are still held", n)
	}
	send(ids[3])
	if _, e := r.query("SELECT 1"); e != nil {
		t.Fatal(e)
	}
	if n := inUse(); n != chunks*chunk {
		t.Errorf("held for one statement: %d bytes, want %d", n, chunks*chunk)
	}
	r.nc.Close()
	eventually(t, 10*time.Second, "a leaving client's long data to be given back", func() bool { return inUse() == 0 })
	// Meanwhile the budget serves others.
	if got := queryValue(t, openDB(t, p.dsn("", "")), "SELECT 'served'"); got != "served" {
		t.Errorf("another client: %s", got)
	}
}
