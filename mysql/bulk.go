package mysql

import "encoding/binary"

// ComStmtBulkExecute is MariaDB's COM_STMT_BULK_EXECUTE (0xfa): one
// prepared statement executed for many rows of parameters (array
// binding: MariaDB Connector/J's useBulkStmts, Connector/C's
// STMT_ATTR_ARRAY_SIZE).
const ComStmtBulkExecute byte = 0xfa

// MariaDBClientStmtBulkOperations is MARIADB_CLIENT_STMT_BULK_OPERATIONS,
// bit 34 of MariaDB's capabilities (bit 2 of the extended ones): a server
// that announces it takes COM_STMT_BULK_EXECUTE.
const MariaDBClientStmtBulkOperations uint32 = 1 << 2

// Flags of COM_STMT_BULK_EXECUTE.
const (
	BulkSendUnitResults uint16 = 64  // STMT_BULK_FLAG_SEND_UNIT_RESULTS: a result per row (MariaDB 11.5)
	BulkSendTypes       uint16 = 128 // STMT_BULK_FLAG_CLIENT_SEND_TYPES: the packet binds the parameter types
)

// Parameter indicators of COM_STMT_BULK_EXECUTE (enum_indicator_type).
const (
	IndicatorNone    byte = 0 // STMT_INDICATOR_NONE: a value follows
	IndicatorNull    byte = 1 // STMT_INDICATOR_NULL
	IndicatorDefault byte = 2 // STMT_INDICATOR_DEFAULT: the column's default
	IndicatorIgnore  byte = 3 // STMT_INDICATOR_IGNORE: leave the column as it is
)

// StmtBulkExecute is a decoded COM_STMT_BULK_EXECUTE payload:
//
//	0xfa, int<4> statement id, int<2> flags,
//	[flags & 128] 2 bytes of type per parameter,
//	rows until the end: per parameter an indicator byte, then the value's
//	binary encoding when the indicator is 0.
type StmtBulkExecute struct {
	ID    uint32
	Flags uint16
	// Rows are the parameter rows as COM_STMT_EXECUTE would bind them
	// (each with every type); their values alias the packet.
	Rows []StmtExecute
	// Special is set when some parameter carries the DEFAULT or IGNORE
	// indicator, which no COM_STMT_EXECUTE can express.
	Special bool
}

// StmtBulkExecuteID returns the statement id of a COM_STMT_BULK_EXECUTE.
func StmtBulkExecuteID(p []byte) (uint32, bool) {
	if len(p) < 7 || p[0] != ComStmtBulkExecute {
		return 0, false
	}
	return binary.LittleEndian.Uint32(p[1:5]), true
}

// ParseStmtBulkExecute decodes a COM_STMT_BULK_EXECUTE payload for a
// statement with nparams parameters (at least one); prevTypes are the
// types the previous execution bound, used when the packet binds none.
func ParseStmtBulkExecute(p []byte, nparams int, prevTypes []byte) (*StmtBulkExecute, error) {
	if len(p) < 7 || p[0] != ComStmtBulkExecute || nparams <= 0 {
		return nil, ErrBadPacket
	}
	b := &StmtBulkExecute{ID: binary.LittleEndian.Uint32(p[1:5]), Flags: binary.LittleEndian.Uint16(p[5:7])}
	r := p[7:]
	types := prevTypes
	if b.Flags&BulkSendTypes != 0 {
		if len(r) < 2*nparams {
			return nil, ErrBadPacket
		}
		types, r = r[:2*nparams], r[2*nparams:]
	} else if len(types) != 2*nparams {
		return nil, NewError(ErMalformedPacket, "COM_STMT_BULK_EXECUTE without parameter types before any were bound")
	}
	for len(r) > 0 {
		row := StmtExecute{ID: b.ID, Iterations: 1, Types: types, NewTypes: true,
			Null: make([]bool, nparams), Values: make([][]byte, nparams)}
		for i := range nparams {
			if len(r) < 1 {
				return nil, ErrBadPacket
			}
			ind := r[0]
			r = r[1:]
			switch ind {
			case IndicatorNone:
				n, err := paramLen(types[2*i], r)
				if err != nil {
					return nil, err
				}
				row.Values[i], r = r[:n], r[n:]
			case IndicatorNull:
				row.Null[i] = true
			case IndicatorDefault, IndicatorIgnore:
				row.Null[i], b.Special = true, true
			default:
				return nil, ErrBadPacket
			}
		}
		b.Rows = append(b.Rows, row)
	}
	if len(b.Rows) == 0 {
		return nil, ErrBadPacket
	}
	return b, nil
}

// AppendStmtBulkExecute encodes a COM_STMT_BULK_EXECUTE of rows (nil
// values with Null unset are not allowed) for statement id, binding the
// types of the first row.
func AppendStmtBulkExecute(b []byte, id uint32, rows []StmtExecute) []byte {
	b = append(b, ComStmtBulkExecute)
	b = binary.LittleEndian.AppendUint32(b, id)
	b = binary.LittleEndian.AppendUint16(b, BulkSendTypes)
	if len(rows) == 0 {
		return b
	}
	b = append(b, rows[0].Types...)
	for _, row := range rows {
		for i, v := range row.Values {
			if row.Null[i] {
				b = append(b, IndicatorNull)
				continue
			}
			b = append(b, IndicatorNone)
			b = append(b, v...)
		}
	}
	return b
}
