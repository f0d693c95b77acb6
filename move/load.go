package move

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

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
// REPLACE statements (copier.checkLocal).
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

// load writes data (appendTSV's lines after 4 bytes of room for the
// packet header, which WritePacket writes in place) to t with LOAD DATA
// LOCAL INFILE ... REPLACE.
func (c *copier) load(cn *client.Conn, t copyTarget, data []byte) error {
	q := "LOAD DATA LOCAL INFILE 'shardgate-copy' REPLACE INTO TABLE " + qualified(t.db, t.name) +
		" CHARACTER SET binary FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (" + c.def.colList() + ")"
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
		if err := errPacket(p); isNotAllowed(err) {
			return fmt.Errorf("%s refuses LOAD DATA LOCAL though local_infile is on: %w", t.node, err)
		}
		return errPacket(p)
	case len(p) == 0 || p[0] != gmysql.LocalInFile_HEADER:
		return fmt.Errorf("LOAD DATA LOCAL: unexpected answer 0x%x", p)
	}
	if len(data) > 4 {
		if err := cn.WritePacket(data); err != nil {
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

// appendTSV appends row as LOAD DATA reads it with the options of load:
// fields separated by tabs, a newline at the end, NULL as \N, and a
// backslash, tab or newline in a value escaped with a backslash.
func appendTSV(dst []byte, row []gmysql.FieldValue) []byte {
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
			s := v.AsString()
			for len(s) > 0 {
				k := bytes.IndexAny(s, "\\\t\n")
				if k < 0 {
					dst = append(dst, s...)
					break
				}
				dst = append(dst, s[:k]...)
				switch s[k] {
				case '\\':
					dst = append(dst, '\\', '\\')
				case '\t':
					dst = append(dst, '\\', 't')
				case '\n':
					dst = append(dst, '\\', 'n')
				}
				s = s[k+1:]
			}
		}
	}
	return append(dst, '\n')
}

// appendTuple appends row as a tuple of a REPLACE's VALUES, after a comma
// unless first (values as literal writes them).
func appendTuple(dst []byte, row []gmysql.FieldValue, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '(')
	for i := range row {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendLiteral(dst, &row[i])
	}
	return append(dst, ')')
}
