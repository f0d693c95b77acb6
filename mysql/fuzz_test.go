package mysql

import (
	"bytes"
	"reflect"
	"testing"
)

// Fuzz targets, one per decoder. Each checks that the decoder never panics
// and, where the format allows, that what it decodes re-encodes to something
// that decodes the same. Seeds live in f.Add calls and in
// testdata/fuzz/<FuzzName>/; crashers found later go there too.

func FuzzReadLenEncInt(f *testing.F) {
	for _, tc := range lenEncIntCases {
		f.Add(tc.wire, tc.v)
	}
	f.Add([]byte{0xfb}, uint64(0xfb))
	f.Add([]byte{0xff, 0x01}, uint64(0xff))
	f.Add([]byte{0xfc, 0x01}, uint64(1<<16-1))
	f.Fuzz(func(t *testing.T, b []byte, v uint64) {
		got, isNull, n := ReadLenEncInt(b)
		switch {
		case n < 0 || n > len(b) || n > 9:
			t.Fatalf("ReadLenEncInt(% x) consumed %d bytes", b, n)
		case n == 0 && (got != 0 || isNull):
			t.Fatalf("ReadLenEncInt(% x) failed but returned %d, %v", b, got, isNull)
		case isNull && (n != 1 || b[0] != 0xfb):
			t.Fatalf("ReadLenEncInt(% x) = NULL from a non-NULL marker", b)
		case n > 0 && !isNull:
			// The canonical encoding is never longer than the input's.
			enc := AppendLenEncInt(nil, got)
			if len(enc) > n {
				t.Fatalf("re-encoding %d takes %d bytes, the input only %d", got, len(enc), n)
			}
			if v2, null2, n2 := ReadLenEncInt(enc); v2 != got || null2 || n2 != len(enc) {
				t.Fatalf("ReadLenEncInt(AppendLenEncInt(%d)) = %d, %v, %d", got, v2, null2, n2)
			}
		}

		enc := AppendLenEncInt(nil, v)
		if len(enc) != LenEncIntSize(v) {
			t.Fatalf("AppendLenEncInt(%d) = %d bytes, LenEncIntSize says %d", v, len(enc), LenEncIntSize(v))
		}
		if v2, null2, n2 := ReadLenEncInt(enc); v2 != v || null2 || n2 != len(enc) {
			t.Fatalf("ReadLenEncInt(AppendLenEncInt(%d)) = %d, %v, %d", v, v2, null2, n2)
		}
	})
}

func FuzzReadLenEncBytes(f *testing.F) {
	f.Add([]byte{0x00})
	f.Add([]byte{0xfb})
	f.Add([]byte{0x03, 'd', 'e', 'f', 0x01})
	f.Add([]byte{0xfc, 0x02, 0x00, 'a', 'b'})
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, isNull, n := ReadLenEncBytes(b)
		switch {
		case n < 0 || n > len(b):
			t.Fatalf("ReadLenEncBytes(% x) consumed %d bytes", b, n)
		case n == 0 && (s != nil || isNull):
			t.Fatalf("ReadLenEncBytes(% x) failed but returned %q, %v", b, s, isNull)
		case isNull && (s != nil || n != 1):
			t.Fatalf("ReadLenEncBytes(% x) = NULL with %q, %d", b, s, n)
		case n > 0 && !isNull:
			if len(s) > n || !bytes.Equal(s, b[n-len(s):n]) {
				t.Fatalf("ReadLenEncBytes(% x) = %q, not the bytes before offset %d", b, s, n)
			}
			enc := AppendLenEncBytes(nil, s)
			if s2, null2, n2 := ReadLenEncBytes(enc); !bytes.Equal(s2, s) || null2 || n2 != len(enc) {
				t.Fatalf("round trip of %q = %q, %v, %d", s, s2, null2, n2)
			}
		}
	})
}

func FuzzParseOK(f *testing.F) {
	for _, tc := range okCases {
		f.Add(tc.wire)
	}
	f.Add([]byte{0x00})
	f.Add([]byte{0xfe, 0x00, 0x00, 0x02, 0x00})
	f.Fuzz(func(t *testing.T, p []byte) {
		ok, err := ParseOK(p)
		if err != nil {
			if err != ErrBadPacket {
				t.Fatalf("ParseOK error = %v, want ErrBadPacket", err)
			}
			return
		}
		ok2, err := ParseOK(AppendOK(nil, p[0], ok))
		if err != nil || ok2 != ok {
			t.Fatalf("round trip of %+v = %+v, %v", ok, ok2, err)
		}
		st, w, id, rok := ResultInfo(p)
		if !rok || st != ok.Status || w != ok.Warnings || id != ok.LastInsertID {
			t.Fatalf("ResultInfo = %#x, %d, %d, %v; ParseOK = %+v", st, w, id, rok, ok)
		}
	})
}

func FuzzParseErr(f *testing.F) {
	f.Add(AppendErr(nil, NewError(ErSyntax, "near 'x'")))
	f.Add([]byte{0xff, 0x6a, 0x04, 'H', 'o', 's', 't'})
	f.Add([]byte{0xff, 0x15, 0x04, '#', '2', '8'})
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		e := ParseErr(p)
		if e == nil {
			t.Fatal("ParseErr returned nil")
		}
		if e == ErrBadPacket {
			return
		}
		if len(e.State) != 5 {
			t.Fatalf("ParseErr state = %q", e.State)
		}
		if e2 := ParseErr(AppendErr(nil, e)); *e2 != *e {
			t.Fatalf("round trip of %+v = %+v", *e, *e2)
		}
	})
}

func FuzzParseColumn(f *testing.F) {
	f.Add(AppendColumn(nil, &Column{Schema: "db", Table: "t", Name: "id", Type: TypeLongLong, Charset: 63, Length: 20}))
	f.Add(AppendColumn(nil, &Column{Name: "price", Type: TypeNewDecimal, Decimals: 2, DefaultValue: []byte("0.00")}))
	f.Add(AppendColumn(nil, &Column{Name: "e", DefaultValue: []byte{}}))
	f.Add(cat([]byte{0, 0, 0, 0, 0, 0, 0x0d}, zeros(13), []byte{0xfb}))
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := ParseColumn(p)
		if err != nil {
			if err != ErrBadPacket || c != nil {
				t.Fatalf("ParseColumn = %+v, %v", c, err)
			}
			return
		}
		want := *c
		if want.Catalog == "" {
			want.Catalog = "def" // AppendColumn's default
		}
		c2, err := ParseColumn(AppendColumn(nil, c))
		if err != nil || !reflect.DeepEqual(c2, &want) {
			t.Fatalf("round trip of %+v = %+v, %v", want, c2, err)
		}
	})
}

func FuzzParseTextRow(f *testing.F) {
	f.Add([]byte{0x01, '1', 0xfb, 0x00, 0x03, 'a', 'b', 'c'}, uint8(4))
	f.Add([]byte{0xfb, 0xfb}, uint8(2))
	f.Add([]byte{0xfc, 0x01, 0x00, 'x'}, uint8(1))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, p []byte, n uint8) {
		vals, err := ParseTextRow(p, int(n), nil)
		if err != nil {
			return
		}
		if len(vals) != int(n) {
			t.Fatalf("ParseTextRow returned %d values, want %d", len(vals), n)
		}
		q := AppendTextRow(nil, vals)
		if len(q) > len(p) {
			t.Fatalf("re-encoded row is longer (%d) than the input (%d)", len(q), len(p))
		}
		vals2, err := ParseTextRow(q, int(n), nil)
		if err != nil {
			t.Fatalf("ParseTextRow(AppendTextRow(%q)): %v", vals, err)
		}
		for i := range vals {
			if (vals[i] == nil) != (vals2[i] == nil) || !bytes.Equal(vals[i], vals2[i]) {
				t.Fatalf("value %d: %q became %q", i, vals[i], vals2[i])
			}
		}
	})
}

func FuzzParseHandshake(f *testing.F) {
	f.Add(AppendHandshake(nil, &Handshake{
		ServerVersion: "8.0.36", ConnectionID: 7, Salt: testSalt, Charset: 255, Status: 2,
		Capabilities: 0xdfffffff, AuthPlugin: AuthCachingSha2Password,
	}))
	f.Add(cat([]byte{0x0a}, []byte("4.0\x00"), zeros(4), []byte("ABCDEFGH\x00"), []byte{0x2c, 0x02}))
	f.Add(cat([]byte{0x0a}, []byte("x\x00"), zeros(4), []byte("ABCDEFGH\x00"), []byte{0x00, 0x82, 0x21, 0, 0, 0x08, 0xff}, zeros(10), []byte("p")))
	f.Add([]byte{0xff, 0x6a, 0x04, 'n', 'o'})
	f.Fuzz(func(t *testing.T, p []byte) {
		h, err := ParseHandshake(p)
		if err != nil {
			return
		}
		if len(h.Salt) < 8 {
			t.Fatalf("ParseHandshake salt = %q, want at least 8 bytes", h.Salt)
		}
		// AppendHandshake always writes a 20-byte salt's second part and a
		// plugin name: round trip what it can express.
		both := ClientSecureConnection | ClientPluginAuth
		if len(h.Salt) != 20 || bytes.IndexByte(h.Salt, 0) >= 0 || h.Capabilities&both != both {
			return
		}
		h2, err := ParseHandshake(AppendHandshake(nil, h))
		if err != nil || !reflect.DeepEqual(h2, h) {
			t.Fatalf("round trip of %+v = %+v, %v", h, h2, err)
		}
	})
}

func FuzzParseHandshakeResponse(f *testing.F) {
	f.Add(handshakeResponseMySQL8)
	f.Add(AppendHandshakeResponse(nil, &HandshakeResponse{
		Capabilities: ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientConnectWithDB,
		MaxPacket:    1 << 24, Charset: 45, User: "u", AuthResponse: []byte("0123"), Database: "d", AuthPlugin: AuthNativePassword,
	}))
	f.Add(cat([]byte{0x05, 0xaa, 0x3f, 0x01}, []byte{0, 0, 0, 1}, []byte{0xff}, zeros(23)))
	f.Add(cat([]byte{0x08, 0x02, 0, 0}, zeros(4), []byte{0x08}, zeros(23), []byte("old\x00pw\x00db")))
	f.Fuzz(func(t *testing.T, p []byte) {
		hr, err := ParseHandshakeResponse(p)
		if err != nil {
			return
		}
		if hr.Capabilities&ClientProtocol41 == 0 {
			t.Fatalf("accepted a response without CLIENT_PROTOCOL_41")
		}
		// AppendHandshakeResponse writes the auth response length-encoded
		// or with a 1-byte length: round trip what it can express.
		lenenc := hr.Capabilities&ClientPluginAuthLenencClientData != 0
		secure := hr.Capabilities&ClientSecureConnection != 0
		if !lenenc && !(secure && len(hr.AuthResponse) <= 255) {
			return
		}
		hr2, err := ParseHandshakeResponse(AppendHandshakeResponse(nil, hr))
		if err != nil {
			t.Fatalf("ParseHandshakeResponse(AppendHandshakeResponse(%+v)): %v", hr, err)
		}
		if len(hr.Attrs) == 0 && len(hr2.Attrs) == 0 {
			hr2.Attrs = hr.Attrs // an empty attribute block decodes as an empty map
		}
		if !reflect.DeepEqual(hr2, hr) {
			t.Fatalf("round trip of %#v = %#v", hr, hr2)
		}
	})
}

func FuzzParseAuthSwitch(f *testing.F) {
	f.Add(AppendAuthSwitch(nil, AuthNativePassword, testSalt))
	f.Add(AppendAuthSwitch(nil, AuthClearPassword, nil))
	f.Add([]byte{0xfe, 0x00, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, p []byte) {
		plugin, data, err := ParseAuthSwitch(p)
		if err != nil {
			return
		}
		plugin2, data2, err := ParseAuthSwitch(AppendAuthSwitch(nil, plugin, data))
		if err != nil || plugin2 != plugin || !bytes.Equal(data2, data) {
			t.Fatalf("round trip of %q, %q = %q, %q, %v", plugin, data, plugin2, data2, err)
		}
	})
}

func FuzzParseChangeUser(f *testing.F) {
	caps := ClientProtocol41 | ClientSecureConnection | ClientPluginAuth
	f.Add(AppendChangeUser(nil, &ChangeUser{User: "bob", AuthResponse: testSalt, Database: "db", Charset: 45, AuthPlugin: AuthNativePassword}, caps), caps)
	f.Add(cat([]byte{0x11}, []byte("bob\x00\x00db")), ClientProtocol41|ClientSecureConnection)
	f.Add(cat([]byte{0x11}, []byte("bob\x00pw\x00db\x00\x21\x00")), ClientProtocol41)
	f.Fuzz(func(t *testing.T, p []byte, caps uint32) {
		cu, err := ParseChangeUser(p, caps)
		if err != nil {
			return
		}
		cu2, err := ParseChangeUser(AppendChangeUser(nil, cu, caps), caps)
		if err != nil || !reflect.DeepEqual(cu2, cu) {
			t.Fatalf("round trip of %#v = %#v, %v", cu, cu2, err)
		}
	})
}

func FuzzResultInfo(f *testing.F) {
	f.Add([]byte{0xfe, 0x00, 0x00, 0x22, 0x00})
	f.Add([]byte{0xfe})
	f.Add(AppendOK(nil, EOFHeader, OK{Status: 2, Warnings: 1, Info: "i"}))
	f.Add(AppendOK(nil, OKHeader, OK{AffectedRows: 1 << 20, LastInsertID: 1 << 40}))
	f.Add([]byte{0xff, 0x15, 0x04})
	f.Fuzz(func(t *testing.T, p []byte) {
		st, w, id, ok := ResultInfo(p)
		if st2, ok2 := ResultStatus(p); st2 != st || ok2 != ok {
			t.Fatalf("ResultStatus = %#x, %v; ResultInfo = %#x, %v", st2, ok2, st, ok)
		}
		if ok && p[0] != OKHeader && p[0] != EOFHeader {
			t.Fatalf("ResultInfo accepted header %#x", p[0])
		}
		if IsEOF(p) && p[0] != EOFHeader {
			t.Fatalf("IsEOF accepted header %#x", p[0])
		}
		if len(p) == 5 && p[0] == EOFHeader {
			if !ok || st != uint16(p[3])|uint16(p[4])<<8 || w != uint16(p[1])|uint16(p[2])<<8 || id != 0 {
				t.Fatalf("classic EOF % x: ResultInfo = %#x, %d, %d, %v", p, st, w, id, ok)
			}
		}
		if o, err := ParseOK(p); err == nil && (!ok || o.Status != st || o.Warnings != w || o.LastInsertID != id) {
			t.Fatalf("ParseOK = %+v; ResultInfo = %#x, %d, %d, %v", o, st, w, id, ok)
		}
	})
}

// fuzzReadLimits are the read buffer and MaxPacket settings FuzzReadPacket
// runs every input through: a tiny buffer so most packets take the large
// path, and a large buffer with a limit below it.
var fuzzReadLimits = []struct{ buf, max int }{{16, 1 << 16}, {4096, 128}}

func FuzzReadPacket(f *testing.F) {
	f.Add(cat(rawPacket(0, []byte("\x03SELECT 1")), rawPacket(1, nil), rawPacket(2, pattern(100, 0))))
	f.Add(rawPacket(1, []byte("x")))
	f.Add([]byte{0xff, 0xff, 0xff, 0x00, 0x01})
	f.Add([]byte{0x05, 0x00})
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, lim := range fuzzReadLimits {
			c := readerConn(stream, lim.buf)
			c.MaxPacket = lim.max
			var out bytes.Buffer
			w := writerConn(&out, 0)
			for {
				p, err := c.ReadPacket()
				if err != nil {
					break
				}
				if len(p) > lim.max {
					t.Fatalf("buffer %d: ReadPacket returned %d bytes, over MaxPacket %d", lim.buf, len(p), lim.max)
				}
				w.WritePacket(p)
			}
			w.Flush()
			// Every packet read is under 16 MiB, so framing it again
			// reproduces the bytes it was read from.
			if !bytes.HasPrefix(stream, out.Bytes()) {
				t.Fatalf("buffer %d: re-framed packets are not a prefix of the input", lim.buf)
			}
		}
	})
}

func FuzzCompressedRead(f *testing.F) {
	f.Add(compressedFrame(0, cat(rawPacket(0, []byte("\x03SELECT 1")), rawPacket(1, pattern(100, 0))), true))
	f.Add(compressedFrame(0, rawPacket(0, []byte("\x0e")), false))
	f.Add(cat([]byte{0x19, 0x00, 0x00, 0x00, 0x4a, 0x00, 0x00}, mustHex("789c73636060600e76f571750e51504fa400a8030067841934")))
	f.Add([]byte{0x05, 0, 0, 0, 0xff, 0xff, 0xff, 'h', 'e', 'l', 'l', 'o'})
	f.Fuzz(func(t *testing.T, stream []byte) {
		c := readerConn(stream, 64)
		c.EnableCompression()
		c.MaxPacket = 1 << 16
		for {
			p, err := c.ReadPacket()
			if err != nil {
				break
			}
			if len(p) > c.MaxPacket {
				t.Fatalf("ReadPacket returned %d bytes, over MaxPacket", len(p))
			}
		}
	})
}

func FuzzParseOKTracked(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0x40, 0, 0, 0, 12, 0, 10, 8, 'a', 'u', 't', 'o', 'c', 'o', 'm', 'm', 1, '1'})
	f.Add([]byte{0xfe, 0, 0, 2, 0x40, 0, 0, 3, 'a', 'b', 'c', 5, 1, 3, 1, 'x'})
	f.Fuzz(func(t *testing.T, p []byte) {
		ok, state, err := ParseOKTracked(p)
		if err != nil {
			return
		}
		changes, err := ParseStateChanges(state)
		if err != nil {
			return
		}
		for _, c := range changes {
			c.SystemVariable()
			c.Schema()
		}
		// What the proxy sends a client without CLIENT_SESSION_TRACK
		// decodes to the same fields.
		back, err := ParseOK(AppendOK(nil, p[0], ok))
		if err != nil || back != ok {
			t.Fatalf("round trip of %+v: %+v, %v", ok, back, err)
		}
	})
}
