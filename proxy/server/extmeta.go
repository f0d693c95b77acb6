package server

import (
	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// MariaDB's extended column metadata (MARIADB_CLIENT_EXTENDED_METADATA):
// the data type and format names (point, inet6, json) its clients show.
// The proxy offers it when every node it has reached is a MariaDB that
// sends it (10.5 and later); a client that takes it gets backend
// connections that have it too (backend.VariantExtMetadata), so forwarded
// column definitions pass as they are, and the ones the proxy writes
// itself carry the field (empty when the proxy knows no names).

// offersExtMetadata reports whether the greeting offers the extended
// metadata: at least one node's version is known and each known one is
// MariaDB 10.5 or later.
func (s *Server) offersExtMetadata() bool {
	seen := false
	for _, n := range s.allNodes() {
		v := n.Version()
		if v == "" {
			continue
		}
		if !backend.MariaDBAtLeast(v, 10, 5) {
			return false
		}
		seen = true
	}
	return seen
}

// greetCaps are the capabilities and MariaDB extended capabilities of the
// greeting: without CLIENT_MYSQL (ClientLongPassword), as MariaDB greets,
// when the extended metadata is offered, and then with
// COM_STMT_BULK_EXECUTE (prepared_bulk.go).
func (s *Server) greetCaps() (caps, ext uint32) {
	if s.offersExtMetadata() {
		return s.caps &^ mysql.ClientLongPassword, mysql.MariaDBClientExtendedMetadata | mysql.MariaDBClientStmtBulkOperations
	}
	return s.caps, 0
}

// extMetadata reports whether the client's column definitions carry the
// extended metadata field.
func (c *conn) extMetadata() bool {
	return c.st != nil && c.st.Variant&backend.VariantExtMetadata != 0
}

// extColumn is col as a client with (ext) or without the extended
// metadata field gets it: a copy when the field must be added (empty) or
// dropped.
func extColumn(col *mysql.Column, ext bool) *mysql.Column {
	if (col.Ext != nil) == ext {
		return col
	}
	cp := *col
	cp.Ext = nil
	if ext {
		cp.Ext = []byte{}
	}
	return &cp
}
