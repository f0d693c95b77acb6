package server_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

// extCaps are rawCaps as MariaDB's own clients send them to a MariaDB
// server: without CLIENT_MYSQL, so that the extended capabilities count.
const extCaps = rawCaps &^ mysql.ClientLongPassword

// loginExt logs in as user with capabilities caps and MariaDB's extended
// capabilities ext (read only when caps lacks CLIENT_MYSQL).
func (r *rawConn) loginExt(user, password, db string, caps, ext uint32) {
	r.t.Helper()
	if db != "" {
		caps |= mysql.ClientConnectWithDB
	}
	r.caps = caps
	r.write(mysql.AppendHandshakeResponse(nil, &mysql.HandshakeResponse{Capabilities: caps, ExtCapabilities: ext,
		MaxPacket: mysql.MaxPacketPayload, Charset: 45, User: user, AuthResponse: mysql.ScrambleNative(r.hs.Salt, password),
		Database: db, AuthPlugin: mysql.AuthNativePassword}))
	r.expectOK()
}

// columns runs q and returns its column definitions, parsed with or
// without the extended metadata field.
func (r *rawConn) columns(q string, ext bool) []*mysql.Column {
	r.t.Helper()
	r.command(append([]byte{mysql.ComQuery}, q...))
	return r.parseColumns(q, r.response(false), 0, ext)
}

// parseColumns parses the column definitions that follow the column count
// at out[at].
func (r *rawConn) parseColumns(q string, out [][]byte, at int, ext bool) []*mysql.Column {
	r.t.Helper()
	if len(out) <= at || out[at][0] == mysql.ErrHeader || out[at][0] == mysql.OKHeader {
		r.t.Fatalf("%s: %s, want a result set", q, describe(out[at]))
	}
	n, _, _ := mysql.ReadLenEncInt(out[at])
	return r.parseDefs(q, out[at+1:at+1+int(n)], ext)
}

func (r *rawConn) parseDefs(q string, defs [][]byte, ext bool) []*mysql.Column {
	r.t.Helper()
	var cols []*mysql.Column
	for _, p := range defs {
		c, err := mysql.ParseColumnExt(p, ext)
		if err != nil {
			r.t.Fatalf("%s: column % x: %v", q, p, err)
		}
		cols = append(cols, c)
	}
	return cols
}

// extNames lists each column's name, type and extended metadata.
func extNames(cols []*mysql.Column) string {
	var b bytes.Buffer
	for _, c := range cols {
		fmt.Fprintf(&b, "%s type %d charset %d ext %q; ", c.Name, c.Type, c.Charset, c.Ext)
	}
	return b.String()
}

// TestExtendedMetadata: a client that asks for MariaDB's extended column
// metadata (MARIADB_CLIENT_EXTENDED_METADATA, as libmariadb and
// Connector/J do) gets the data type and format names MariaDB sends
// directly, on every route: forwarded from one node, merged across
// shards (plain columns and aggregates), a prepared statement's
// metadata, and results the proxy answers itself (with an empty field).
// Clients that do not ask, with or without CLIENT_MYSQL, get definitions
// without the field.
func TestExtendedMetadata(t *testing.T) {
	e := newShardEnv(t, "extmeta",
		config.ShardRule{Table: "shp", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{2, 2}})
	const cols = "(id INT PRIMARY KEY, j JSON, g POINT, a INET6, u UUID, v VARCHAR(10))"
	rows := "(1, '{}', POINT(1, 2), '::1', '123e4567-e89b-12d3-a456-426655440000', 'x'), " +
		"(2, '[]', POINT(3, 4), '::2', '123e4567-e89b-12d3-a456-426655440001', 'y')"
	// The proxy's parser does not know POINT, INET6 and UUID in a CREATE
	// TABLE: the subtables are made on the servers.
	for _, sb := range hashSubs("shp") {
		mustExec(t, e.direct[sb.node], "CREATE TABLE "+sb.name+" "+cols)
	}
	mustExec(t, e.app, "CREATE TABLE plain "+cols, "INSERT INTO plain VALUES "+rows, "INSERT INTO shp VALUES "+rows)
	s := e.servers[0]
	direct := dialRaw(t, s.Addr)
	direct.loginExt(s.User, s.Password, "extmeta", extCaps, mysql.MariaDBClientExtendedMetadata)

	r := dialRaw(t, e.p.addr)
	if r.hs.Capabilities&mysql.ClientLongPassword != 0 || r.hs.ExtCapabilities&mysql.MariaDBClientExtendedMetadata == 0 {
		t.Fatalf("greeting: capabilities %#x, extended %#x; want no CLIENT_MYSQL and MARIADB_CLIENT_EXTENDED_METADATA",
			r.hs.Capabilities, r.hs.ExtCapabilities)
	}
	r.loginExt(appUser, appPassword, "extmeta", extCaps, mysql.MariaDBClientExtendedMetadata)

	want := direct.columns("SELECT id, j, g, a, u, v FROM plain ORDER BY id", true)
	wantExt := map[string]string{"j": "\x01\x04json", "g": "\x00\x05point", "a": "\x00\x05inet6", "u": "\x00\x04uuid", "id": "", "v": ""}
	for _, c := range want {
		if string(c.Ext) != wantExt[c.Name] {
			t.Errorf("MariaDB directly: %s has %q, want %q", c.Name, c.Ext, wantExt[c.Name])
		}
	}
	same := func(route string, got, want []*mysql.Column, tables bool) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %s\nwant %s", route, extNames(got), extNames(want))
		}
		for i := range got {
			g, w := *got[i], *want[i]
			if !tables {
				g.Table, g.OrgTable, w.Table, w.OrgTable = "", "", "", ""
			}
			if fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("%s: column %d\n got %+v\nwant %+v", route, i, g, w)
			}
		}
	}
	same("unsharded (forwarded)", r.columns("SELECT id, j, g, a, u, v FROM plain ORDER BY id", true), want, true)
	same("sharded, one shard", r.columns("SELECT id, j, g, a, u, v FROM shp WHERE id = 1", true), want, false)
	same("sharded, merged", r.columns("SELECT id, j, g, a, u, v FROM shp ORDER BY id", true), want, false)
	agg := "SELECT MAX(a), MIN(u), MAX(j), COUNT(*) FROM "
	same("sharded, aggregated", r.columns(agg+"shp", true), direct.columns(agg+"plain", true), false)

	_, prep := r.prepare("SELECT j, g, a FROM shp WHERE id = ?")
	_, prepDirect := direct.prepare("SELECT j, g, a FROM plain WHERE id = ?")
	if len(prep) != len(prepDirect) {
		t.Fatalf("prepare: %d packets, MariaDB %d", len(prep), len(prepDirect))
	}
	same("prepared", r.parseDefs("prepare", prep[2:], true), direct.parseDefs("prepare", prepDirect[2:], true), false)
	if c := r.parseDefs("prepare", prep[1:2], true)[0]; c.Ext == nil {
		t.Errorf("prepared statement's parameter without the extended field: %+v", c)
	}

	for _, c := range r.columns("SHOW PROCESSLIST", true) {
		if c.Ext == nil || len(c.Ext) != 0 {
			t.Errorf("SHOW PROCESSLIST (the proxy's own result): %s has %q, want an empty field", c.Name, c.Ext)
		}
	}

	for _, caps := range []uint32{rawCaps, extCaps} {
		plain := dialRaw(t, e.p.addr)
		plain.loginExt(appUser, appPassword, "extmeta", caps, 0)
		for _, q := range []string{"SELECT j, g, a FROM plain", "SELECT j, g, a FROM shp ORDER BY id", agg + "shp", "SHOW PROCESSLIST"} {
			for _, c := range plain.columns(q, false) {
				if c.Ext != nil {
					t.Errorf("client without the capability (caps %#x), %s: %s has %q", caps, q, c.Name, c.Ext)
				}
			}
		}
	}
}
