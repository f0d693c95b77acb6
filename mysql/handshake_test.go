package mysql

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// testSalt is a 20-byte scramble without NUL bytes.
var testSalt = []byte("abcdefghijklmnopqrst")

func TestAppendHandshake(t *testing.T) {
	h := &Handshake{
		ServerVersion: "5.7.99-shardgate",
		ConnectionID:  0x01020304,
		Salt:          testSalt,
		Capabilities: ClientLongPassword | ClientConnectWithDB | ClientProtocol41 | ClientTransactions |
			ClientSecureConnection | ClientMultiResults | ClientPluginAuth | ClientDeprecateEOF,
		Charset:    45,
		Status:     StatusAutocommit,
		AuthPlugin: AuthNativePassword,
	}
	want := cat(
		[]byte{0x0a},                        // protocol version 10
		[]byte("5.7.99-shardgate\x00"),      // server version
		[]byte{0x04, 0x03, 0x02, 0x01},      // connection id
		[]byte("abcdefgh"),                  // auth-plugin-data-part-1
		[]byte{0x00},                        // filler
		[]byte{0x09, 0xa2},                  // capability flags, lower 2 bytes
		[]byte{0x2d},                        // character set 45
		[]byte{0x02, 0x00},                  // status flags
		[]byte{0x0a, 0x01},                  // capability flags, upper 2 bytes
		[]byte{0x15},                        // length of auth-plugin-data: 21
		zeros(10),                           // reserved
		[]byte("ijklmnopqrst\x00"),          // auth-plugin-data-part-2, 13 bytes
		[]byte("mysql_native_password\x00"), // auth plugin name
	)
	got := AppendHandshake(nil, h)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendHandshake =\n% x\nwant\n% x", got, want)
	}
	parsed, err := ParseHandshake(got)
	if err != nil {
		t.Fatalf("ParseHandshake: %v", err)
	}
	if !reflect.DeepEqual(parsed, h) {
		t.Errorf("ParseHandshake(AppendHandshake(h)) =\n%+v\nwant\n%+v", parsed, h)
	}
}

// TestParseHandshakeServers decodes greetings in the form real servers send
// them, assembled by hand from the protocol documentation.
func TestParseHandshakeServers(t *testing.T) {
	tests := []struct {
		name string
		p    []byte
		want *Handshake
	}{
		{
			name: "MySQL 8 with caching_sha2_password",
			p: cat(
				[]byte{0x0a}, []byte("8.0.36\x00"),
				[]byte{0x0b, 0x00, 0x00, 0x00},
				[]byte("\x01\x02\x03\x04\x05\x06\x07\x08"), []byte{0x00},
				[]byte{0xff, 0xff}, []byte{0xff}, []byte{0x02, 0x00}, []byte{0xff, 0xdf},
				[]byte{0x15}, zeros(10),
				[]byte("\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x00"),
				[]byte("caching_sha2_password\x00"),
			),
			want: &Handshake{
				ServerVersion: "8.0.36",
				ConnectionID:  11,
				Salt:          []byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14"),
				Capabilities:  0xdfffffff,
				Charset:       0xff,
				Status:        StatusAutocommit,
				AuthPlugin:    AuthCachingSha2Password,
			},
		},
		{
			name: "MariaDB without the final NUL after the plugin name",
			p: cat(
				[]byte{0x0a}, []byte("5.5.5-10.11.6-MariaDB\x00"),
				[]byte{0x2a, 0x00, 0x00, 0x00},
				[]byte("ABCDEFGH"), []byte{0x00},
				[]byte{0xfe, 0xf7}, []byte{0x2d}, []byte{0x02, 0x00}, []byte{0xff, 0x81},
				[]byte{0x15}, zeros(6), []byte{0x1d, 0x00, 0x00, 0x00}, // MariaDB extended capabilities
				[]byte("IJKLMNOPQRST\x00"),
				[]byte("mysql_native_password"),
			),
			want: &Handshake{
				ServerVersion:   "5.5.5-10.11.6-MariaDB",
				ConnectionID:    42,
				Salt:            []byte("ABCDEFGHIJKLMNOPQRST"),
				Capabilities:    0x81fff7fe,
				ExtCapabilities: 0x1d, // progress, bulk, extended metadata, metadata cache
				Charset:         45,
				Status:          StatusAutocommit,
				AuthPlugin:      AuthNativePassword,
			},
		},
		{
			name: "old server: only the first part of the salt",
			p: cat(
				[]byte{0x0a}, []byte("4.0.30\x00"),
				[]byte{0x01, 0x00, 0x00, 0x00},
				[]byte("ABCDEFGH"), []byte{0x00},
				[]byte{0x2c, 0x02}, // LONG_FLAG|CONNECT_WITH_DB|COMPRESS|PROTOCOL_41
			),
			want: &Handshake{
				ServerVersion: "4.0.30",
				ConnectionID:  1,
				Salt:          []byte("ABCDEFGH"),
				Capabilities:  0x022c,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHandshake(tc.p)
			if err != nil {
				t.Fatalf("ParseHandshake: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseHandshake =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseHandshakeErrors(t *testing.T) {
	// A server that refuses the connection sends ERR instead of a greeting.
	refused := cat([]byte{0xff, 0x6a, 0x04}, []byte("Host 'app-host' is not allowed to connect to this MariaDB server"))
	_, err := ParseHandshake(refused)
	var se *SQLError
	if !errors.As(err, &se) || se.Code != ErHostNotPrivileged || se.Message != string(refused[3:]) {
		t.Errorf("ParseHandshake(ERR) = %v, want the server's error 1130", err)
	}

	_, err = ParseHandshake(cat([]byte{0x09}, []byte("3.23\x00"), zeros(20)))
	if !errors.As(err, &se) || se.Code != ErHandshake {
		t.Errorf("ParseHandshake(protocol 9) = %v, want error %d", err, ErHandshake)
	}

	full := AppendHandshake(nil, &Handshake{
		ServerVersion: "v", Salt: testSalt, AuthPlugin: AuthNativePassword,
		Capabilities: ClientProtocol41 | ClientSecureConnection | ClientPluginAuth,
	})
	// Up to the lower capability flags everything is required; after them,
	// truncation inside the salt's second part is malformed.
	for _, n := range []int{0, 1, 2, 3, 7, 8, 15, 16, 17, 20, 21, 30, 35} {
		if _, err := ParseHandshake(full[:n]); err == nil {
			t.Errorf("ParseHandshake(%d of %d bytes) succeeded", n, len(full))
		}
	}
}

// handshakeResponseMySQL8 is a HandshakeResponse41 as MySQL 8's libmysqlclient
// sends it with a default database and connection attributes.
var handshakeResponseMySQL8 = cat(
	[]byte{0x8d, 0xa2, 0x3f, 0x01}, // capabilities 0x013fa28d
	[]byte{0x00, 0x00, 0x00, 0x01}, // max packet 16 MiB
	[]byte{0xff},                   // utf8mb4_0900_ai_ci
	zeros(23),                      // filler
	[]byte("root\x00"),
	[]byte{0x14}, // auth response, length-encoded
	[]byte("\x10\x21\x32\x43\x54\x65\x76\x87\x98\xa9\xba\xcb\xdc\xed\xfe\x0f\x01\x02\x03\x04"),
	[]byte("shop\x00"),
	[]byte("caching_sha2_password\x00"),
	[]byte{0x2a}, // attributes, 42 bytes
	[]byte{0x03}, []byte("_os"), []byte{0x05}, []byte("Linux"),
	[]byte{0x0c}, []byte("_client_name"), []byte{0x08}, []byte("libmysql"),
	[]byte{0x04}, []byte("_pid"), []byte{0x04}, []byte("4242"),
)

func TestParseHandshakeResponse(t *testing.T) {
	tests := []struct {
		name string
		p    []byte
		want *HandshakeResponse
	}{
		{
			name: "MySQL 8 client: lenenc auth, database, plugin, attributes",
			p:    handshakeResponseMySQL8,
			want: &HandshakeResponse{
				Capabilities: ClientLongPassword | ClientLongFlag | ClientConnectWithDB | ClientLocalFiles |
					ClientProtocol41 | ClientTransactions | ClientSecureConnection | ClientMultiStatements |
					ClientMultiResults | ClientPSMultiResults | ClientPluginAuth | ClientConnectAttrs |
					ClientPluginAuthLenencClientData | ClientDeprecateEOF,
				MaxPacket:    1 << 24,
				Charset:      0xff,
				User:         "root",
				AuthResponse: []byte("\x10\x21\x32\x43\x54\x65\x76\x87\x98\xa9\xba\xcb\xdc\xed\xfe\x0f\x01\x02\x03\x04"),
				Database:     "shop",
				AuthPlugin:   AuthCachingSha2Password,
				Attrs:        map[string]string{"_os": "Linux", "_client_name": "libmysql", "_pid": "4242"},
			},
		},
		{
			name: "secure connection with 1-byte auth length, no database",
			p: cat(
				[]byte{0x05, 0xa2, 0x0a, 0x00}, // LONG_PASSWORD|LONG_FLAG|PROTOCOL_41|TRANSACTIONS|SECURE_CONNECTION|MULTI_RESULTS|PLUGIN_AUTH
				[]byte{0x00, 0x00, 0x00, 0x40},
				[]byte{0x21},
				zeros(23),
				[]byte("app\x00"),
				[]byte{0x03, 0xaa, 0xbb, 0xcc},
				[]byte("mysql_native_password\x00"),
			),
			want: &HandshakeResponse{
				Capabilities: ClientLongPassword | ClientLongFlag | ClientProtocol41 | ClientTransactions |
					ClientSecureConnection | ClientMultiResults | ClientPluginAuth,
				MaxPacket:    1 << 30,
				Charset:      33,
				User:         "app",
				AuthResponse: []byte{0xaa, 0xbb, 0xcc},
				AuthPlugin:   AuthNativePassword,
			},
		},
		{
			name: "empty password, database without the final NUL",
			p: cat(
				[]byte{0x08, 0x82, 0x20, 0x00}, // CONNECT_WITH_DB|PROTOCOL_41|SECURE_CONNECTION|PLUGIN_AUTH_LENENC
				[]byte{0xff, 0xff, 0xff, 0x00},
				[]byte{0x08},
				zeros(23),
				[]byte("u\x00"),
				[]byte{0x00},
				[]byte("db"),
			),
			want: &HandshakeResponse{
				Capabilities: ClientConnectWithDB | ClientProtocol41 | ClientSecureConnection | ClientPluginAuthLenencClientData,
				MaxPacket:    0xffffff,
				Charset:      8,
				User:         "u",
				AuthResponse: nil, // an empty password decodes as nil
				Database:     "db",
			},
		},
		{
			name: "4.1 client without secure connection: NUL-terminated auth response",
			p: cat(
				[]byte{0x08, 0x02, 0x00, 0x00}, // CONNECT_WITH_DB|PROTOCOL_41
				[]byte{0x00, 0x00, 0x00, 0x01},
				[]byte{0x08},
				zeros(23),
				[]byte("old\x00"),
				[]byte("12345678\x00"),
				[]byte("test\x00"),
			),
			want: &HandshakeResponse{
				Capabilities: ClientConnectWithDB | ClientProtocol41,
				MaxPacket:    1 << 24,
				Charset:      8,
				User:         "old",
				AuthResponse: []byte("12345678"),
				Database:     "test",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHandshakeResponse(tc.p)
			if err != nil {
				t.Fatalf("ParseHandshakeResponse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseHandshakeResponse =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

func TestParseHandshakeResponseRefused(t *testing.T) {
	tests := []struct {
		name string
		p    []byte
		code uint16
	}{
		{
			name: "without CLIENT_PROTOCOL_41",
			p:    cat([]byte{0x85, 0xa0, 0x00, 0x00}, []byte{0, 0, 0, 1}, []byte{0x08}, zeros(23), []byte("root\x00\x00")),
			code: ErHandshake,
		},
		{
			name: "pre-4.1 HandshakeResponse320",
			p:    cat([]byte{0x85, 0x20}, []byte{0x00, 0x00, 0x01}, []byte("root\x00"), []byte("12345678")),
			code: ErHandshake,
		},
		{
			name: "SSL request",
			p:    cat([]byte{0x05, 0xaa, 0x3f, 0x01}, []byte{0, 0, 0, 1}, []byte{0xff}, zeros(23)),
			code: ErHandshake,
		},
		{
			name: "shorter than the capabilities",
			p:    []byte{0x00, 0x02},
			code: ErHandshake,
		},
		{
			name: "truncated filler",
			p:    cat([]byte{0x00, 0x02, 0x00, 0x00}, []byte{0, 0, 0, 1}, []byte{0x08}, zeros(22)),
			code: ErMalformedPacket,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hr, err := ParseHandshakeResponse(tc.p)
			var se *SQLError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("ParseHandshakeResponse = %+v, %v; want error %d", hr, err, tc.code)
			}
		})
	}
}

func TestParseHandshakeResponseMalformed(t *testing.T) {
	// Every truncation inside the user name, the auth response and the
	// attributes is malformed; the database and plugin name may end the
	// packet without their NUL.
	p := handshakeResponseMySQL8
	userStart := 32
	authEnd := userStart + len("root\x00") + 1 + 20
	for n := userStart; n < authEnd; n++ {
		if hr, err := ParseHandshakeResponse(p[:n]); err == nil {
			t.Errorf("ParseHandshakeResponse(%d of %d bytes) = %+v, want an error", n, len(p), hr)
		}
	}
	attrsStart := authEnd + len("shop\x00caching_sha2_password\x00")
	for n := attrsStart + 1; n < len(p); n++ {
		if hr, err := ParseHandshakeResponse(p[:n]); err == nil {
			t.Errorf("ParseHandshakeResponse(%d of %d bytes) = %+v, want an error", n, len(p), hr)
		}
	}

	tests := []struct {
		name  string
		attrs []byte
	}{
		{"attribute value missing", cat([]byte{0x04}, []byte{0x03}, []byte("_os"))},
		{"attribute length beyond the packet", []byte{0xfc, 0x00, 0x10, 0x00}},
		{"attribute length of 2^63-1", []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00}},
		{"attribute length of 2^64-1", []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := cat(p[:attrsStart], tc.attrs)
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("ParseHandshakeResponse panicked: %v", r)
				}
			}()
			if hr, err := ParseHandshakeResponse(q); err != ErrBadPacket {
				t.Errorf("ParseHandshakeResponse = %+v, %v; want ErrBadPacket", hr, err)
			}
		})
	}
}

func TestHandshakeResponseRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		hr   *HandshakeResponse
		want []byte // nil: only the round trip is checked
	}{
		{
			name: "proxy to backend: lenenc auth, database, plugin",
			hr: &HandshakeResponse{
				Capabilities: ClientLongPassword | ClientConnectWithDB | ClientProtocol41 | ClientSecureConnection |
					ClientPluginAuth | ClientPluginAuthLenencClientData,
				MaxPacket:    MaxPacketPayload,
				Charset:      45,
				User:         "shard",
				AuthResponse: []byte("01234567890123456789"),
				Database:     "db_0001",
				AuthPlugin:   AuthNativePassword,
			},
			want: cat(
				[]byte{0x09, 0x82, 0x28, 0x00}, []byte{0xff, 0xff, 0xff, 0x00}, []byte{0x2d}, zeros(23),
				[]byte("shard\x00"), []byte{0x14}, []byte("01234567890123456789"),
				[]byte("db_0001\x00"), []byte("mysql_native_password\x00"),
			),
		},
		{
			name: "1-byte auth length, no database, empty password",
			hr: &HandshakeResponse{
				Capabilities: ClientProtocol41 | ClientSecureConnection | ClientPluginAuth,
				MaxPacket:    1 << 24,
				Charset:      8,
				User:         "nopw",
				AuthResponse: nil,
				AuthPlugin:   AuthCachingSha2Password,
			},
			want: cat(
				[]byte{0x00, 0x82, 0x08, 0x00}, []byte{0x00, 0x00, 0x00, 0x01}, []byte{0x08}, zeros(23),
				[]byte("nopw\x00"), []byte{0x00}, []byte("caching_sha2_password\x00"),
			),
		},
		{
			name: "attributes",
			hr: &HandshakeResponse{
				Capabilities: ClientProtocol41 | ClientSecureConnection | ClientPluginAuthLenencClientData |
					ClientConnectAttrs | ClientConnectWithDB,
				MaxPacket:    1 << 24,
				Charset:      45,
				User:         "a",
				AuthResponse: bytes.Repeat([]byte{0x5a}, 300),
				Database:     "",
				Attrs:        map[string]string{"program_name": "shardgate", "_pid": "1", "": ""},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := AppendHandshakeResponse(nil, tc.hr)
			if tc.want != nil && !bytes.Equal(p, tc.want) {
				t.Errorf("AppendHandshakeResponse =\n% x\nwant\n% x", p, tc.want)
			}
			got, err := ParseHandshakeResponse(p)
			if err != nil {
				t.Fatalf("ParseHandshakeResponse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.hr) {
				t.Errorf("round trip =\n%#v\nwant\n%#v", got, tc.hr)
			}
		})
	}
}

func TestAuthSwitch(t *testing.T) {
	tests := []struct {
		plugin string
		data   []byte
		wire   []byte
	}{
		{AuthNativePassword, testSalt, cat([]byte{0xfe}, []byte("mysql_native_password\x00"), testSalt, []byte{0x00})},
		{AuthCachingSha2Password, testSalt, cat([]byte{0xfe}, []byte("caching_sha2_password\x00"), testSalt, []byte{0x00})},
		{AuthClearPassword, []byte{}, cat([]byte{0xfe}, []byte("mysql_clear_password\x00"), []byte{0x00})},
	}
	for _, tc := range tests {
		p := AppendAuthSwitch(nil, tc.plugin, tc.data)
		if !bytes.Equal(p, tc.wire) {
			t.Errorf("AppendAuthSwitch(%s) = % x, want % x", tc.plugin, p, tc.wire)
		}
		plugin, data, err := ParseAuthSwitch(p)
		if err != nil || plugin != tc.plugin || !bytes.Equal(data, tc.data) {
			t.Errorf("ParseAuthSwitch(% x) = %q, % x, %v; want %q, % x", p, plugin, data, err, tc.plugin, tc.data)
		}
		if len(data) > 0 && &data[0] == &p[len(tc.plugin)+2] {
			t.Errorf("ParseAuthSwitch(%s) returned data aliasing the packet", tc.plugin)
		}
	}

	// Servers that omit the final NUL are accepted too.
	plugin, data, err := ParseAuthSwitch(cat([]byte{0xfe}, []byte("mysql_native_password\x00"), testSalt))
	if err != nil || plugin != AuthNativePassword || !bytes.Equal(data, testSalt) {
		t.Errorf("ParseAuthSwitch without final NUL = %q, %q, %v", plugin, data, err)
	}
	for _, p := range [][]byte{nil, {0xfe}, []byte("\xfemysql_native_password"), []byte("\x01mysql_native_password\x00")} {
		if _, _, err := ParseAuthSwitch(p); err != ErrBadPacket {
			t.Errorf("ParseAuthSwitch(%q) error = %v, want ErrBadPacket", p, err)
		}
	}
}

// appendChangeUser builds a COM_CHANGE_USER payload for a client with the
// given capabilities; the package itself only decodes the command.
func TestParseChangeUser(t *testing.T) {
	scramble := []byte("\x10\x21\x32\x43\x54\x65\x76\x87\x98\xa9\xba\xcb\xdc\xed\xfe\x0f\x01\x02\x03\x04")
	tests := []struct {
		name string
		caps uint32
		p    []byte
		want *ChangeUser
	}{
		{
			name: "charset and plugin",
			caps: ClientProtocol41 | ClientSecureConnection | ClientPluginAuth,
			p: cat([]byte{0x11}, []byte("bob\x00"), []byte{0x14}, scramble, []byte("shop\x00"),
				[]byte{0x2d, 0x00}, []byte("mysql_native_password\x00")),
			want: &ChangeUser{User: "bob", AuthResponse: scramble, Database: "shop", Charset: 45, AuthPlugin: AuthNativePassword},
		},
		{
			name: "charset, plugin and connection attributes",
			caps: ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientConnectAttrs,
			p: cat([]byte{0x11}, []byte("bob\x00"), []byte{0x14}, scramble, []byte("\x00"),
				[]byte{0xff, 0x00}, []byte("caching_sha2_password\x00"),
				[]byte{0x09, 0x03}, []byte("_os"), []byte{0x04}, []byte("BSD")),
			want: &ChangeUser{User: "bob", AuthResponse: scramble, Charset: 255, AuthPlugin: AuthCachingSha2Password},
		},
		{
			name: "charset but no plugin capability",
			caps: ClientProtocol41 | ClientSecureConnection,
			p:    cat([]byte{0x11}, []byte("bob\x00"), []byte{0x14}, scramble, []byte("shop\x00"), []byte{0x21, 0x00}),
			want: &ChangeUser{User: "bob", AuthResponse: scramble, Database: "shop", Charset: 33},
		},
		{
			name: "neither charset nor plugin",
			caps: ClientProtocol41 | ClientSecureConnection | ClientPluginAuth,
			p:    cat([]byte{0x11}, []byte("bob\x00"), []byte{0x00}, []byte("shop\x00")),
			want: &ChangeUser{User: "bob", Database: "shop"},
		},
		{
			name: "database without its NUL",
			caps: ClientProtocol41 | ClientSecureConnection,
			p:    cat([]byte{0x11}, []byte("bob\x00"), []byte{0x00}, []byte("shop")),
			want: &ChangeUser{User: "bob", Database: "shop"},
		},
		{
			name: "NUL-terminated auth response without secure connection",
			caps: ClientProtocol41,
			p:    cat([]byte{0x11}, []byte("bob\x00"), []byte("12345678\x00"), []byte("shop\x00")),
			want: &ChangeUser{User: "bob", AuthResponse: []byte("12345678"), Database: "shop"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseChangeUser(tc.p, tc.caps)
			if err != nil {
				t.Fatalf("ParseChangeUser: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseChangeUser =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}

	caps := ClientProtocol41 | ClientSecureConnection | ClientPluginAuth
	for _, p := range [][]byte{
		nil,
		{ComQuery},
		cat([]byte{0x11}, []byte("bob")), // user without NUL
		cat([]byte{0x11}, []byte("bob\x00"), []byte{0x14}, scramble[:5]),                   // short auth response
		cat([]byte{0x11}, []byte("bob\x00"), []byte{0x00}, []byte("db\x00"), []byte{0x21}), // half a charset
	} {
		if cu, err := ParseChangeUser(p, caps); err != ErrBadPacket {
			t.Errorf("ParseChangeUser(% x) = %+v, %v; want ErrBadPacket", p, cu, err)
		}
	}
}
