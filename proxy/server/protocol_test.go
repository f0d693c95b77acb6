package server_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
)

// TestGreeting checks the server greeting byte by byte.
func TestGreeting(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	direct := openDB(t, directDSN(s, "", ""))
	backendVersion := queryValue(t, direct, "SELECT VERSION()")

	r := dialRaw(t, p.addr)
	if r.greeting[0] != 10 {
		t.Fatalf("protocol version %d, want 10", r.greeting[0])
	}
	hs := r.hs
	if !strings.HasSuffix(hs.ServerVersion, "-shardgate") || !strings.Contains(hs.ServerVersion, backendVersion) {
		t.Errorf("server version %q, want the backend's %q with suffix -shardgate", hs.ServerVersion, backendVersion)
	}
	if hs.ConnectionID == 0 {
		t.Error("connection id 0")
	}
	if r2 := dialRaw(t, p.addr); r2.hs.ConnectionID == hs.ConnectionID {
		t.Errorf("two connections share id %d", hs.ConnectionID)
	}
	if len(hs.Salt) != 20 || strings.IndexByte(string(hs.Salt), 0) >= 0 {
		t.Errorf("salt %x: want 20 bytes without NUL", hs.Salt)
	}
	if hs.AuthPlugin != mysql.AuthNativePassword {
		t.Errorf("auth plugin %q", hs.AuthPlugin)
	}
	if hs.Charset != 45 {
		t.Errorf("charset %d, want 45 (utf8mb4_general_ci)", hs.Charset)
	}
	if hs.Status != mysql.StatusAutocommit {
		t.Errorf("status %#x, want autocommit", hs.Status)
	}
	for _, c := range []struct {
		name string
		flag uint32
	}{
		{"CLIENT_PROTOCOL_41", mysql.ClientProtocol41},
		{"CLIENT_SECURE_CONNECTION", mysql.ClientSecureConnection},
		{"CLIENT_PLUGIN_AUTH", mysql.ClientPluginAuth},
		{"CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA", mysql.ClientPluginAuthLenencClientData},
		{"CLIENT_CONNECT_WITH_DB", mysql.ClientConnectWithDB},
		{"CLIENT_TRANSACTIONS", mysql.ClientTransactions},
		{"CLIENT_MULTI_STATEMENTS", mysql.ClientMultiStatements},
		{"CLIENT_MULTI_RESULTS", mysql.ClientMultiResults},
		{"CLIENT_PS_MULTI_RESULTS", mysql.ClientPSMultiResults},
		{"CLIENT_LOCAL_FILES", mysql.ClientLocalFiles},
		{"CLIENT_DEPRECATE_EOF", mysql.ClientDeprecateEOF},
		{"CLIENT_COMPRESS", mysql.ClientCompress},
	} {
		if hs.Capabilities&c.flag == 0 {
			t.Errorf("greeting lacks %s (capabilities %#x)", c.name, hs.Capabilities)
		}
	}
	// The proxy has no TLS: offering it would make clients fail.
	if hs.Capabilities&mysql.ClientSSL != 0 {
		t.Errorf("greeting offers CLIENT_SSL")
	}
	// The greeting's layout: the auth data length byte and the 10 reserved
	// bytes sit where protocol 10 says.
	verEnd := strings.IndexByte(string(r.greeting[1:]), 0) + 1
	fixed := r.greeting[verEnd+1:]
	if got := binary.LittleEndian.Uint32(fixed[0:4]); got != hs.ConnectionID {
		t.Errorf("connection id field %d", got)
	}
	if fixed[12] != 0 {
		t.Errorf("filler after salt part 1 is %#x", fixed[12])
	}
	if got := fixed[20]; got != 21 {
		t.Errorf("auth data length %d, want 21", got)
	}
	for i, b := range fixed[21:27] {
		if b != 0 {
			t.Errorf("reserved byte %d is %#x", i, b)
		}
	}
	// The last 4 are MariaDB's extended capabilities, as a MariaDB server
	// sends them (without CLIENT_MYSQL): the extended metadata among them.
	if ext := binary.LittleEndian.Uint32(fixed[27:31]); hs.Capabilities&mysql.ClientLongPassword != 0 ||
		ext != hs.ExtCapabilities || ext&mysql.MariaDBClientExtendedMetadata == 0 {
		t.Errorf("capabilities %#x, extended capabilities %#x: want MariaDB's (no CLIENT_MYSQL, extended metadata)", hs.Capabilities, ext)
	}

	r.login(rawCaps)
	rows, e := r.query("SELECT 'raw', NULL, 7")
	if e != nil || joinRows(rows) != "raw,NULL,7" {
		t.Fatalf("query: %q %v", rows, e)
	}
}

// TestMalformedHandshakeResponse sends broken handshake responses: each
// gets ERR 1043 with the next sequence number, then the connection closes.
func TestMalformedHandshakeResponse(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	valid := func(caps uint32) []byte {
		return mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
			Capabilities: caps, MaxPacket: 1 << 24, Charset: 45, User: appUser,
			AuthResponse: make([]byte, 20), AuthPlugin: mysql.AuthNativePassword,
		})
	}
	sslRequest := binary.LittleEndian.AppendUint32(nil, rawCaps|mysql.ClientSSL)
	sslRequest = append(sslRequest, make([]byte, 28)...)
	sslRequest[8] = 45
	for _, tc := range []struct {
		name string
		p    []byte
	}{
		{"two bytes", []byte{0x01, 0x02}},
		{"empty", []byte{}},
		{"no CLIENT_PROTOCOL_41", valid(rawCaps &^ mysql.ClientProtocol41)},
		{"truncated in the filler", valid(rawCaps)[:20]},
		{"user without NUL", valid(rawCaps)[:32+len(appUser)]},
		{"auth response past the end", append(valid(rawCaps)[:32+len(appUser)+1], 200, 1, 2, 3)},
		{"SSL request", sslRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, p.addr)
			r.write(tc.p)
			e := r.expectErr(mysql.ErHandshake)
			if e.State != "08S01" {
				t.Errorf("SQLSTATE %s, want 08S01", e.State)
			}
			r.expectClosed()
		})
	}
	// None of it hurt the server.
	r := dialRaw(t, p.addr)
	r.login(rawCaps)
}

// TestRawCommands sends commands the driver never sends, or sends wrongly
// on purpose, and checks each answer and that the connection stays usable.
func TestRawCommands(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "raw_t")
	r := dialRaw(t, p.addr)
	r.login(rawCaps)
	ping := func() {
		t.Helper()
		r.command([]byte{mysql.ComPing})
		r.expectOK()
	}

	for _, cmd := range []byte{mysql.ComBinlogDump, 0x20, mysql.ComRegisterSlave, mysql.ComShutdown, 0xff} {
		r.command([]byte{cmd, 0, 0, 0, 0})
		e := r.expectErr(mysql.ErNotSupported)
		if e.State != "42000" {
			t.Errorf("command %#x: SQLSTATE %s", cmd, e.State)
		}
		if cmd == mysql.ComBinlogDump && !strings.Contains(e.Message, "COM_BINLOG_DUMP") {
			t.Errorf("message %q does not name COM_BINLOG_DUMP", e.Message)
		}
		ping()
	}

	// An empty command packet.
	r.command(nil)
	r.expectErr(mysql.ErMalformedPacket)
	ping()

	// Statement commands without a prepared statement.
	execute := []byte{mysql.ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0}
	r.command(execute)
	r.expectErr(mysql.ErUnknownStmtHandler)
	ping()
	r.command([]byte{mysql.ComStmtFetch, 1, 0, 0, 0, 1, 0, 0, 0})
	r.expectErr(mysql.ErUnknownStmtHandler)
	ping()
	// COM_STMT_CLOSE has no reply, so the next reply is the ping's.
	r.command([]byte{mysql.ComStmtClose, 1, 0, 0, 0})
	ping()

	// The same once the session holds a backend connection: MariaDB answers.
	if _, e := r.query("SET @pin = 1"); e != nil {
		t.Fatal(e)
	}
	r.command(execute)
	r.expectErr(mysql.ErUnknownStmtHandler)
	ping()

	// COM_QUERY with nothing in it.
	r.command([]byte{mysql.ComQuery})
	r.expectErr(mysql.ErEmptyQuery)
	ping()

	// COM_INIT_DB.
	r.command(append([]byte{mysql.ComInitDB}, "no_such_db"...))
	r.expectErr(mysql.ErBadDB)
	r.command(append([]byte{mysql.ComInitDB}, "raw_t"...))
	r.expectOK()
	if rows, e := r.query("SELECT DATABASE()"); e != nil || joinRows(rows) != "raw_t" {
		t.Fatalf("after COM_INIT_DB: %q %v", rows, e)
	}

	// A prepared statement by hand: prepare, execute, close.
	r.command(append([]byte{mysql.ComStmtPrepare}, "SELECT ? + 1"...))
	pk := r.read()
	if len(pk) < 12 || pk[0] != mysql.OKHeader {
		t.Fatalf("prepare: %s", describe(pk))
	}
	id := binary.LittleEndian.Uint32(pk[1:5])
	cols, params := binary.LittleEndian.Uint16(pk[5:7]), binary.LittleEndian.Uint16(pk[7:9])
	if cols != 1 || params != 1 {
		t.Fatalf("prepare: %d columns %d params", cols, params)
	}
	r.read() // the parameter definition
	r.read() // the column definition (no EOFs under CLIENT_DEPRECATE_EOF)
	ex := []byte{mysql.ComStmtExecute}
	ex = binary.LittleEndian.AppendUint32(ex, id)
	ex = append(ex, 0)                            // flags
	ex = binary.LittleEndian.AppendUint32(ex, 1)  // iteration count
	ex = append(ex, 0, 1, mysql.TypeLongLong, 0)  // null bitmap, new-params-bound, type
	ex = binary.LittleEndian.AppendUint64(ex, 41) // the value
	r.command(ex)
	if pk := r.read(); len(pk) != 1 || pk[0] != 1 {
		t.Fatalf("execute: column count %s", describe(pk))
	}
	r.read() // column definition
	row := r.read()
	if len(row) < 2 || row[0] != 0 {
		t.Fatalf("execute: binary row %s", describe(row))
	}
	if end := r.read(); !mysql.IsEOF(end) {
		t.Fatalf("execute: got %s, want the closing OK", describe(end))
	}
	r.command(binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtClose}, id))
	ping()

	// COM_QUIT closes the connection.
	r.command([]byte{mysql.ComQuit})
	r.expectClosed()
}

// TestAuthSwitch: a client that answers with a plugin the proxy does not
// speak is switched to the configured one.
func TestAuthSwitch(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	r := dialRaw(t, p.addr)
	r.write(mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{
		Capabilities: rawCaps, MaxPacket: 1 << 24, Charset: 45, User: appUser,
		AuthResponse: []byte("whatever"), AuthPlugin: "dialog",
	}))
	pk := r.read()
	plugin, salt, err := mysql.ParseAuthSwitch(pk)
	if err != nil {
		t.Fatalf("got %s, want an auth switch request", describe(pk))
	}
	if plugin != mysql.AuthNativePassword || string(salt) != string(r.hs.Salt) {
		t.Fatalf("auth switch to %q with salt %x, want %q with the greeting's salt", plugin, salt, mysql.AuthNativePassword)
	}
	r.write(mysql.ScrambleNative(salt, appPassword))
	r.expectOK()
	r.caps = rawCaps
	if rows, e := r.query("SELECT 1"); e != nil || joinRows(rows) != "1" {
		t.Fatalf("query after auth switch: %q %v", rows, e)
	}
}

// TestRawCompression speaks the compressed protocol by hand; the session's
// backend connection compresses too, so the server's per-connection
// status says so, as it would directly (mtr main.compress).
func TestRawCompression(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	r := dialRaw(t, p.addr)
	r.login(rawCaps | mysql.ClientCompress)
	for _, n := range []int{1, 100, 100000, 1 << 20} {
		rows, e := r.query("SELECT REPEAT('x', " + strconv.Itoa(n) + "), 'end'")
		if e != nil {
			t.Fatalf("REPEAT %d: %v", n, e)
		}
		if len(rows) != 1 || rows[0][0] != strings.Repeat("x", n) || rows[0][1] != "end" {
			t.Fatalf("REPEAT %d: wrong result", n)
		}
	}
	if _, e := r.query("SELECT * FROM no_such_db.t"); e == nil || e.Code != 1049 && e.Code != 1146 {
		t.Fatalf("error through compression: %v", e)
	}
	r.command([]byte{mysql.ComPing})
	r.expectOK()
	for _, q := range []string{"SHOW STATUS LIKE 'Compression'", "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COMPRESSION'"} {
		rows, e := r.query(q)
		if e != nil || rows[0][len(rows[0])-1] != "ON" {
			t.Errorf("%s: %v %v, want ON", q, rows, e)
		}
	}
	plain := dialRaw(t, p.addr)
	plain.login(rawCaps)
	if rows, e := plain.query("SHOW STATUS LIKE 'Compression'"); e != nil || rows[0][1] != "OFF" {
		t.Errorf("SHOW STATUS LIKE 'Compression' without compression: %v %v, want OFF", rows, e)
	}
}

// TestRawParity sends the same commands, byte for byte, to MariaDB and
// through the proxy, with and without CLIENT_DEPRECATE_EOF (the two pool
// variants), and compares every response packet.
func TestRawParity(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "rawpar")
	direct := openDB(t, directDSN(s, "rawpar", ""))
	mustExec(t, direct, "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(10), d DECIMAL(5,2))", "INSERT INTO t VALUES (1, 'a', 1.5), (2, NULL, NULL)")

	query := func(q string) []byte { return append([]byte{mysql.ComQuery}, q...) }
	setOption := func(v uint16) []byte { return binary.LittleEndian.AppendUint16([]byte{mysql.ComSetOption}, v) }
	commands := []struct {
		name      string
		cmd       []byte
		fieldList bool
	}{
		{"ping", []byte{mysql.ComPing}, false},
		{"select", query("SELECT 1 AS a, NULL, 'x', 2.5, -1"), false},
		{"select table", query("SELECT * FROM t ORDER BY id"), false},
		{"empty result", query("SELECT * FROM t WHERE id < 0"), false},
		// Writes go to a temporary table, so that each side has its own.
		{"create temporary", query("CREATE TEMPORARY TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"), false},
		{"insert", query("INSERT INTO w (v) VALUES (1), (2)"), false},
		{"update", query("UPDATE w SET v = v + 1"), false},
		{"delete", query("DELETE FROM w WHERE id = 1"), false},
		{"duplicate", query("INSERT INTO w VALUES (2, 0)"), false},
		{"do", query("DO 1"), false},
		{"warning", query("SELECT 1/0"), false},
		{"show warnings", query("SHOW WARNINGS"), false},
		{"error", query("SELECT * FROM t_missing"), false},
		{"syntax error", query("SELEC 1"), false},
		{"multi-statement off", query("SELECT 1; SELECT 2"), false},
		{"set option on", setOption(mysql.OptionMultiStatementsOn), false},
		{"multi-statement", query("SELECT 1; SELECT 'b', 2; DO 3"), false},
		{"multi-statement error", query("SELECT 1; SELECT * FROM t_missing; SELECT 3"), false},
		{"set option off", setOption(mysql.OptionMultiStatementsOff), false},
		{"field list", append([]byte{mysql.ComFieldList}, "t\x00"...), true},
		{"init db bad", append([]byte{mysql.ComInitDB}, "no_such_db"...), false},
		{"init db", append([]byte{mysql.ComInitDB}, "rawpar"...), false},
		{"begin", query("BEGIN"), false},
		{"in transaction", query("SELECT @@in_transaction"), false},
		{"commit", query("COMMIT"), false},
		{"reset connection", []byte{mysql.ComResetConnection}, false},
		{"after reset", query("SELECT @@in_transaction, DATABASE()"), false},
		{"temporary table gone", query("SELECT * FROM w"), false},
	}
	for _, variant := range rawEOFVariants {
		t.Run(variant.name, func(t *testing.T) {
			d, pr := rawPair(t, s, p, "rawpar", variant.caps)
			for _, c := range commands {
				d.command(c.cmd)
				want := d.response(c.fieldList)
				pr.command(c.cmd)
				samePackets(t, c.name, pr.response(c.fieldList), want)
			}
		})
	}
}

// rawEOFVariants are the two framings of result sets a client may ask for.
var rawEOFVariants = []struct {
	name string
	caps uint32
}{{"DEPRECATE_EOF", rawCaps}, {"classic EOF", rawCaps &^ mysql.ClientDeprecateEOF}}

// rawPair logs in to MariaDB directly and through the proxy, with the same
// capabilities and database.
func rawPair(t *testing.T, s *mariadbtest.Server, p *proxy, db string, caps uint32) (direct, proxied *rawConn) {
	t.Helper()
	direct = dialRaw(t, s.Addr)
	direct.sendHandshakeResponse(s.User, s.Password, db, caps)
	direct.expectOK()
	proxied = dialRaw(t, p.addr)
	proxied.sendHandshakeResponse(appUser, appPassword, db, caps)
	proxied.expectOK()
	return direct, proxied
}

// samePackets reports every packet of a response through the proxy that
// differs from MariaDB's.
func samePackets(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		// The two streams no longer line up: stop here.
		t.Fatalf("%s: %d packets through the proxy, %d from MariaDB\nproxy:   %x\nmariadb: %x", what, len(got), len(want), got, want)
	}
	for i := range want {
		if string(got[i]) != string(want[i]) {
			t.Errorf("%s: packet %d differs\nproxy:   %x (%q)\nmariadb: %x (%q)", what, i, got[i], got[i], want[i], want[i])
		}
	}
}

// response reads every packet of one command's response: OK, ERR, EOF, or
// result sets chained by SERVER_MORE_RESULTS_EXISTS; with fieldList, column
// definitions up to EOF.
func (r *rawConn) response(fieldList bool) [][]byte {
	r.t.Helper()
	var out [][]byte
	next := func() []byte {
		p := r.read()
		out = append(out, p)
		return p
	}
	more := func(p []byte) bool {
		st, _, _, ok := mysql.ResultInfo(p)
		return ok && st&mysql.StatusMoreResultsExists != 0
	}
	if fieldList {
		for {
			if p := next(); len(p) == 0 || p[0] == mysql.ErrHeader || mysql.IsEOF(p) {
				return out
			}
		}
	}
	for {
		p := next()
		switch {
		case len(p) == 0:
			r.t.Fatal("empty packet in a response")
		case p[0] == mysql.ErrHeader:
			return out
		case p[0] == mysql.OKHeader || mysql.IsEOF(p):
			if !more(p) {
				return out
			}
			continue
		}
		n, _, _ := mysql.ReadLenEncInt(p)
		for range n {
			next()
		}
		if r.caps&mysql.ClientDeprecateEOF == 0 {
			next()
		}
		for {
			p := next()
			if len(p) > 0 && p[0] == mysql.ErrHeader {
				return out
			}
			if mysql.IsEOF(p) {
				if !more(p) {
					return out
				}
				break
			}
		}
	}
}

// prepare sends COM_STMT_PREPARE and returns the statement id and the
// response with the id zeroed (ids differ between the proxy and MariaDB).
func (r *rawConn) prepare(q string) (uint32, [][]byte) {
	r.t.Helper()
	r.command(append([]byte{mysql.ComStmtPrepare}, q...))
	ok := r.read()
	if len(ok) < 12 || ok[0] != mysql.OKHeader {
		return 0, [][]byte{ok}
	}
	id := binary.LittleEndian.Uint32(ok[1:5])
	out := [][]byte{append(append([]byte{ok[0]}, 0, 0, 0, 0), ok[5:]...)}
	for _, n := range []uint16{binary.LittleEndian.Uint16(ok[7:9]), binary.LittleEndian.Uint16(ok[5:7])} {
		for range n {
			out = append(out, r.read())
		}
		if n > 0 && r.caps&mysql.ClientDeprecateEOF == 0 {
			out = append(out, r.read())
		}
	}
	return id, out
}

// TestChangeUser drives COM_CHANGE_USER by hand: the session's state is
// reset; a wrong password leaves the session as it was, and after three
// refusals the command gets 1047, as on MariaDB (MDEV-3915).
func TestChangeUser(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "cu_a", "cu_b")
	r := dialRaw(t, p.addr)
	r.loginDB("cu_a", rawCaps)
	for _, q := range []string{"SET @v = 1", "BEGIN"} {
		if _, e := r.query(q); e != nil {
			t.Fatal(e)
		}
	}
	changeUser := func(password, db string) []byte {
		b := append([]byte{mysql.ComChangeUser}, appUser...)
		b = append(b, 0)
		auth := mysql.ScrambleNative(r.hs.Salt, password)
		b = append(b, byte(len(auth)))
		b = append(b, auth...)
		b = append(b, db...)
		b = append(b, 0)
		b = binary.LittleEndian.AppendUint16(b, 45)
		b = append(b, mysql.AuthNativePassword...)
		return append(b, 0)
	}
	r.command(changeUser(appPassword, "cu_b"))
	r.expectOK()
	rows, e := r.query("SELECT COALESCE(@v, 'NULL'), @@in_transaction, DATABASE()")
	if e != nil || joinRows(rows) != "NULL,0,cu_b" {
		t.Fatalf("after COM_CHANGE_USER: %q %v, want NULL,0,cu_b", rows, e)
	}
	r.command(changeUser(appPassword, ""))
	r.expectOK()
	if rows, e := r.query("SELECT COALESCE(DATABASE(), 'NULL')"); e != nil || joinRows(rows) != "NULL" {
		t.Errorf("after COM_CHANGE_USER without a database: %q %v, want NULL", rows, e)
	}
	if _, e := r.query("SET @w = 2"); e != nil {
		t.Fatal(e)
	}
	for range 3 {
		r.command(changeUser(appPassword+"x", "cu_a"))
		r.expectErr(mysql.ErAccessDenied)
		if rows, e := r.query("SELECT @w, COALESCE(DATABASE(), 'NULL')"); e != nil || joinRows(rows) != "2,NULL" {
			t.Fatalf("after a refused COM_CHANGE_USER: %q %v, want 2,NULL (the session as it was)", rows, e)
		}
	}
	r.command(changeUser(appPassword, ""))
	r.expectErr(mysql.ErUnknownComError)
}

// TestRawCursorParity drives a binary prepared statement with a read-only
// cursor by hand, against MariaDB and through the proxy (a schema without
// shard rules, where the proxy owns the statement): open, fetch in steps,
// reset, fetch without a cursor, execute without a cursor. The packets
// must be MariaDB's, statement ids aside.
func TestRawCursorParity(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	dbSetup(t, s, "rawcur")
	direct := openDB(t, directDSN(s, "rawcur", ""))
	mustExec(t, direct, "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(10))", "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL), (4, 'd'), (5, 'e')")

	// readUntil reads packets up to ERR or the first one stop accepts.
	readUntil := func(r *rawConn, stop func([]byte) bool) [][]byte {
		var out [][]byte
		for {
			pk := r.read()
			out = append(out, pk)
			if len(pk) == 0 || pk[0] == mysql.ErrHeader || stop(pk) {
				return out
			}
		}
	}
	isEOF := func(pk []byte) bool { return mysql.IsEOF(pk) }
	prepare := func(r *rawConn, q string) (uint32, [][]byte) { return r.prepare(q) }
	execute := func(id uint32, flags byte, v uint64) []byte {
		ex := binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtExecute}, id)
		ex = append(ex, flags)
		ex = binary.LittleEndian.AppendUint32(ex, 1)
		ex = append(ex, 0, 1, mysql.TypeLongLong, 0)
		return binary.LittleEndian.AppendUint64(ex, v)
	}
	fetch := func(id, rows uint32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtFetch}, id), rows)
	}
	// openCursor reads the answer to an execution that opens a cursor:
	// column count, definitions, one EOF.
	openCursor := func(r *rawConn) [][]byte {
		first := r.read()
		if first[0] == mysql.ErrHeader {
			return [][]byte{first}
		}
		n, _, _ := mysql.ReadLenEncInt(first)
		out := [][]byte{first}
		for range n {
			out = append(out, r.read())
		}
		return append(out, r.read())
	}
	for _, variant := range rawEOFVariants {
		t.Run(variant.name, func(t *testing.T) {
			d, pr := rawPair(t, s, p, "rawcur", variant.caps)
			const q = "SELECT id, s FROM t WHERE id > ? ORDER BY id"
			did, dp := prepare(d, q)
			pid, pp := prepare(pr, q)
			steps := []struct {
				name string
				cmd  func(id uint32) []byte
				read func(r *rawConn) [][]byte
			}{
				{"open cursor", func(id uint32) []byte { return execute(id, 1, 1) }, openCursor},
				{"fetch 2", func(id uint32) []byte { return fetch(id, 2) }, func(r *rawConn) [][]byte { return readUntil(r, isEOF) }},
				{"fetch rest", func(id uint32) []byte { return fetch(id, 10) }, func(r *rawConn) [][]byte { return readUntil(r, isEOF) }},
				{"reopen", func(id uint32) []byte { return execute(id, 1, 3) }, openCursor},
				{"fetch 1", func(id uint32) []byte { return fetch(id, 1) }, func(r *rawConn) [][]byte { return readUntil(r, isEOF) }},
				{"reset", func(id uint32) []byte { return binary.LittleEndian.AppendUint32([]byte{mysql.ComStmtReset}, id) }, func(r *rawConn) [][]byte { return [][]byte{r.read()} }},
				{"execute without cursor", func(id uint32) []byte { return execute(id, 0, 2) }, func(r *rawConn) [][]byte { return r.response(false) }},
			}
			samePackets(t, "prepare", pp, dp)
			for _, st := range steps {
				d.command(st.cmd(did))
				want := st.read(d)
				pr.command(st.cmd(pid))
				samePackets(t, st.name, st.read(pr), want)
			}
			// A fetch after the cursor was read to the end or reset: both
			// answer an error (messages name their own ids).
			d.command(fetch(did, 1))
			de := d.read()
			pr.command(fetch(pid, 1))
			pe := pr.read()
			if de[0] != mysql.ErrHeader || pe[0] != mysql.ErrHeader || string(de[1:3]) != string(pe[1:3]) {
				t.Errorf("fetch without a cursor: proxy %s, MariaDB %s", describe(pe), describe(de))
			}
		})
	}
}

// TestRawIgnoreSpace: a client that logs in with CLIENT_IGNORE_SPACE
// (mariadb -i) gets backend connections that parse as it asked, "COUNT
// (*)" included (mtr main.mysql); others do not.
func TestRawIgnoreSpace(t *testing.T) {
	s := backends(t)[0]
	p := startProxy(t, newConfig(t, s))
	r := dialRaw(t, p.addr)
	r.login(rawCaps | mysql.ClientIgnoreSpace)
	if rows, e := r.query("SELECT COUNT (*) FROM (SELECT 1) t"); e != nil || joinRows(rows) != "1" {
		t.Errorf("SELECT COUNT (*) with CLIENT_IGNORE_SPACE: %v %v", rows, e)
	}
	plain := dialRaw(t, p.addr)
	plain.login(rawCaps)
	if _, e := plain.query("SELECT COUNT (*) FROM (SELECT 1) t"); e == nil || e.Code != mysql.ErSyntax {
		t.Errorf("SELECT COUNT (*) without CLIENT_IGNORE_SPACE: %v, want 1064", e)
	}
	// A second such client after the first left takes its connection,
	// reset for it (COM_RESET_CONNECTION), with IGNORE_SPACE again.
	r.command([]byte{mysql.ComQuit})
	r.nc.Close()
	eventually(t, 5*time.Second, "the first client's session to end", func() bool { return p.srv.Stats().Sessions == 1 })
	again := dialRaw(t, p.addr)
	again.login(rawCaps | mysql.ClientIgnoreSpace)
	if rows, e := again.query("SELECT COUNT (*) FROM (SELECT 1) t"); e != nil || joinRows(rows) != "1" {
		t.Errorf("SELECT COUNT (*) with CLIENT_IGNORE_SPACE on a connection another session left: %v %v", rows, e)
	}
}
