package session

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/shardgate/shardgate/mysql"
)

// refClientState is ClientState as it was before it filtered in place
// (parsing every entry into a slice and building a new packet): the
// reference TestClientStateInPlace holds the new one to, byte for byte.
func refClientState(ts *trackState, backend []byte) []byte {
	if !ts.client || !ts.known {
		return nil
	}
	var changes []mysql.StateChange
	if len(backend) > 0 {
		changes, _ = mysql.ParseStateChanges(backend)
	}
	if len(changes) == 0 && len(ts.pendingVars) == 0 && len(ts.pendingSchema) == 0 && !ts.pendingState && len(ts.pendingTxn) == 0 {
		return nil
	}
	vars, _ := mysql.ParseStateChanges(ts.pendingVars)
	for _, c := range changes {
		if name, _, ok := c.SystemVariable(); ok && ts.tracksVar(name) {
			vars = append(vars, c)
		}
	}
	var out []byte
	for _, c := range vars {
		out = mysql.AppendStateChange(out, c.Type, c.Data)
	}
	schema := ts.pendingSchema
	state := ts.pendingState
	for _, c := range changes {
		switch c.Type {
		case mysql.TrackSchema:
			if ts.trackers.Schema {
				schema = mysql.AppendStateChange(nil, c.Type, c.Data)
			}
		case mysql.TrackStateChange:
			state = state || ts.trackers.StateChange
		}
	}
	out = append(out, schema...)
	if state {
		out = mysql.AppendTrackedStateChange(out)
	}
	out = append(out, ts.pendingTxn...)
	for _, c := range changes {
		if (c.Type == mysql.TrackTransactionState || c.Type == mysql.TrackTransactionCharacteristics) && ts.tracksTxn(c.Type) {
			out = mysql.AppendStateChange(out, c.Type, c.Data)
		}
	}
	ts.pendingVars, ts.pendingSchema, ts.pendingState, ts.pendingTxn = nil, nil, false, nil
	if len(out) == 0 {
		return nil
	}
	return out
}

// TestClientStateInPlace: ClientState gives what refClientState gives
// for random reports of the server (system variables tracked or not, in
// either case, schemas, state changes, transaction characteristics,
// malformed tails; the transaction's state, which ClientState merges, is
// TestTxnStateMerged's) under random trackers and with random notes of the proxy's
// pending, and allocates nothing once warm.
func TestClientStateInPlace(t *testing.T) {
	sysVar := func(name, value string) []byte {
		return mysql.AppendStateChange(nil, mysql.TrackSystemVariables,
			mysql.AppendLenEncString(mysql.AppendLenEncString(nil, name), value))
	}
	entries := [][]byte{
		sysVar("last_gtid", "0-3307-12"),
		sysVar("autocommit", "OFF"),
		sysVar("Time_Zone", "+01:00"),
		sysVar("character_set_client", "latin1"),
		sysVar("sql_mode", "ANSI"),
		mysql.AppendTrackedSchema(nil, "db1"),
		mysql.AppendTrackedSchema(nil, "other"),
		mysql.AppendTrackedStateChange(nil),
		mysql.AppendStateChange(nil, mysql.TrackTransactionCharacteristics, mysql.AppendLenEncString(nil, "START TRANSACTION;")),
		mysql.AppendStateChange(nil, mysql.TrackGTIDs, []byte{0, 1, 'x'}),
	}
	malformed := [][]byte{{mysql.TrackSchema}, {mysql.TrackSchema, 9, 'a'}, {mysql.TrackSystemVariables, 2, 1, 'a'}}
	trackers := []Trackers{
		{},
		{SystemVariables: "autocommit,character_set_client,character_set_connection,character_set_results,time_zone", Schema: true},
		{SystemVariables: "*", Schema: true, StateChange: true, TransactionInfo: "CHARACTERISTICS"},
		{SystemVariables: "LAST_GTID", StateChange: true, TransactionInfo: "STATE"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	var a, b trackState
	for i := range 20000 {
		if i%50 == 0 {
			tr := trackers[r.IntN(len(trackers))]
			client := r.IntN(8) != 0
			for _, ts := range []*trackState{&a, &b} {
				ts.forgetTrackers()
				ts.TrackClient(client)
				ts.SetTrackers(tr)
			}
		}
		var backend []byte
		for range r.IntN(5) {
			backend = append(backend, entries[r.IntN(len(entries))]...)
		}
		if r.IntN(20) == 0 {
			backend = append(backend, malformed[r.IntN(len(malformed))]...)
		}
		for _, ts := range []*trackState{&a, &b} {
			switch i % 7 {
			case 1:
				ts.NoteVar("character_set_results", "utf8mb4")
			case 2:
				ts.NoteSchema("db2")
			case 4:
				ts.NoteServerState(backend, i%2 == 0)
			}
		}
		want := refClientState(&a, backend)
		got := b.ClientState(backend)
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("step %d, trackers %+v, report %q: got %q, want %q", i, b.trackers, backend, got, want)
		}
	}

	b.forgetTrackers()
	b.TrackClient(true)
	b.SetTrackers(trackers[1])
	report := append(append(sysVar("last_gtid", "0-3307-12"), sysVar("time_zone", "SYSTEM")...), mysql.AppendTrackedSchema(nil, "db1")...)
	b.ClientState(report)
	if n := testing.AllocsPerRun(100, func() { b.ClientState(report) }); n != 0 {
		t.Errorf("ClientState of a relayed report: %v allocations, want 0", n)
	}
}

// TestTxnStateMerged: the transaction's state reaches a client that
// tracks it when it changes, as from one MariaDB, whatever the nodes
// report: one node's report as it is, a second node's report of what
// the first already reported not at all, a report that adds something
// merged, the end of the transaction (a server's or the proxy's) once.
func TestTxnStateMerged(t *testing.T) {
	entry := func(s string) []byte {
		return mysql.AppendStateChange(nil, mysql.TrackTransactionState, mysql.AppendLenEncString(nil, s))
	}
	var ts trackState
	ts.TrackClient(true)
	ts.SetTrackers(Trackers{TransactionInfo: "STATE"})
	for i, step := range []struct {
		proxy   string   // NoteTxnState
		targets []string // NoteTargetState, one per node
		relayed string   // ClientState's backend
		want    string   // "" for nothing
	}{
		{proxy: "T_______", want: "T_______"},
		{targets: []string{"T___W___", "T___W___"}, want: "T___W___"},
		{targets: []string{"T___W___"}},
		{relayed: "T___W___"},
		{relayed: "T_R_W_S_", want: "T_R_W_S_"},
		{proxy: "________", want: "________"},
		{targets: []string{"I___W___", "I_____S_"}, want: "I___W_S_"},
		{relayed: "________", want: "________"},
		{relayed: "________"},
		{proxy: "T_______", want: "T_______"},
		{proxy: "T_______"},
	} {
		if step.proxy != "" {
			ts.NoteTxnState(step.proxy)
		}
		for _, s := range step.targets {
			ts.NoteTargetState(entry(s))
		}
		var backend []byte
		if step.relayed != "" {
			backend = entry(step.relayed)
		}
		var want []byte
		if step.want != "" {
			want = entry(step.want)
		}
		if got := ts.ClientState(backend); !bytes.Equal(got, want) {
			t.Errorf("step %d: got %q, want %q", i, got, want)
		}
	}
}
