package move

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-mysql-org/go-mysql/client"
	gmysql "github.com/go-mysql-org/go-mysql/mysql"
)

// The copy writes each batch with LOAD DATA LOCAL INFILE ... REPLACE: the
// rows go to the server as tab-separated bytes, which it parses at about
// twice the rate of a multi-row REPLACE's SQL (the INTO OUTFILE + LOAD
// DATA anchor of make bench-move against mariadb-dump | mariadb), and
// the proxy encodes with less work than SQL literals. REPLACE keeps the
// write idempotent; CHARACTER SET binary stores every byte as it was read
// (character_set_results NULL), as the _binary literals of REPLACE do. A
// server with local_infile=OFF refuses it, and the copy falls back to
// REPLACE statements.
//
// go-mysql's client does not answer the server's request for the file,
// so load speaks that part of the protocol itself: COM_QUERY, the
// server's 0xFB request, the data as packets, an empty packet, then OK or
// ERR.

// dialLocalFiles is dial with the CLIENT_LOCAL_FILES capability, which
// LOAD DATA LOCAL needs.
func dialLocalFiles(ep Endpoint) (*client.Conn, error) {
	return dialWith(ep, func(c *client.Conn) { c.SetCapability(gmysql.CLIENT_LOCAL_FILES) })
}

// loadBufs recycles the batches' encoded bytes.
var loadBufs = sync.Pool{New: func() any { return new([]byte) }}

// load writes rows to t with LOAD DATA LOCAL INFILE ... REPLACE.
func (c *copier) load(cn *client.Conn, t copyTarget, rows [][]gmysql.FieldValue) error {
	q := "LOAD DATA LOCAL INFILE 'shardgate-copy' REPLACE INTO TABLE " + qualified(t.db, t.name) +
		" CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (" + c.def.colList() + ")"
	bp := loadBufs.Get().(*[]byte)
	defer loadBufs.Put(bp)
	// 4 bytes for the packet header WritePacket writes in place.
	buf := appendTSV(append((*bp)[:0], 0, 0, 0, 0), rows)
	*bp = buf
	cn.ResetSequence()
	cmd := make([]byte, 5, 5+len(q))
	cmd[4] = gmysql.COM_QUERY
	if err := cn.WritePacket(append(cmd, q...)); err != nil {
		return err
	}
	p, err := cn.ReadPacket()
	if err != nil {
		return err
	}
	switch {
	case len(p) > 0 && p[0] == gmysql.ERR_HEADER:
		return errPacket(p)
	case len(p) == 0 || p[0] != gmysql.LocalInFile_HEADER:
		return fmt.Errorf("LOAD DATA LOCAL: unexpected answer 0x%x", p)
	}
	if len(buf) > 4 {
		if err := cn.WritePacket(buf); err != nil {
			return err
		}
	}
	if err := cn.WritePacket([]byte{0, 0, 0, 0}); err != nil { // the end of the file
		return err
	}
	if p, err = cn.ReadPacket(); err != nil {
		return err
	}
	if len(p) > 0 && p[0] == gmysql.ERR_HEADER {
		return errPacket(p)
	}
	return nil
}

// errPacket is an ERR packet's error (protocol 4.1: code, '#', SQLSTATE,
// message).
func errPacket(p []byte) error {
	e := &gmysql.MyError{}
	if len(p) >= 3 {
		e.Code = binary.LittleEndian.Uint16(p[1:3])
	}
	if len(p) >= 9 && p[3] == '#' {
		e.State, e.Message = string(p[4:9]), string(p[9:])
	} else if len(p) > 3 {
		e.Message = string(p[3:])
	}
	return e
}

// isNotAllowed reports the server's refusal of LOAD DATA LOCAL
// (ER_NOT_ALLOWED_COMMAND, 1148).
func isNotAllowed(err error) bool {
	var me *gmysql.MyError
	return errors.As(err, &me) && me.Code == 1148
}

// appendTSV appends rows as LOAD DATA reads them with the defaults above:
// fields separated by tabs, rows ended by newlines, NULL as \N, and a
// backslash, tab or newline in a value escaped with a backslash.
func appendTSV(dst []byte, rows [][]gmysql.FieldValue) []byte {
	for _, row := range rows {
		for i := range row {
			if i > 0 {
				dst = append(dst, '\t')
			}
			v := &row[i]
			switch v.Type {
			case gmysql.FieldValueTypeNull:
				dst = append(dst, '\\', 'N')
			case gmysql.FieldValueTypeSigned:
				dst = strconv.AppendInt(dst, v.AsInt64(), 10)
			case gmysql.FieldValueTypeUnsigned:
				dst = strconv.AppendUint(dst, v.AsUint64(), 10)
			case gmysql.FieldValueTypeFloat:
				dst = strconv.AppendFloat(dst, v.AsFloat64(), 'g', -1, 64)
			default:
				for _, b := range v.AsString() {
					switch b {
					case '\\':
						dst = append(dst, '\\', '\\')
					case '\t':
						dst = append(dst, '\\', 't')
					case '\n':
						dst = append(dst, '\\', 'n')
					default:
						dst = append(dst, b)
					}
				}
			}
		}
		dst = append(dst, '\n')
	}
	return dst
}
