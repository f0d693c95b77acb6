package server_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

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
	for i, b := range fixed[21:31] {
		if b != 0 {
			t.Errorf("reserved byte %d is %#x", i, b)
		}
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
	ex = append(ex, 0)                                    // flags
	ex = binary.LittleEndian.AppendUint32(ex, 1)          // iteration count
	ex = append(ex, 0, 1, mysql.TypeLongLong, 0)          // null bitmap, new-params-bound, type
	ex = binary.LittleEndian.AppendUint64(ex, 41)         // the value
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

// TestRawCompression speaks the compressed protocol by hand.
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
}
