package changestream

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/client"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"

	"github.com/shardgate/shardgate/mysql"
)

// decoder turns text stored in one character set into UTF-8. Single-byte
// character sets use the server's own table (read once per reader with
// CONVERT ... USING utf8mb4, so latin1 is MariaDB's latin1, which is
// cp1252 with the five undefined bytes as C1 controls); multi-byte ones
// use golang.org/x/text. A byte sequence the character set does not
// define (only non-strict modes store one) becomes U+FFFD.
type decoder struct {
	table *[256]rune        // single-byte character sets
	multi *encoding.Decoder // multi-byte ones
}

func (d *decoder) decode(b []byte) string {
	switch {
	case d.table != nil:
		out := make([]rune, len(b))
		for i, c := range b {
			out[i] = d.table[c]
		}
		return string(out)
	case d.multi != nil:
		s, err := d.multi.Bytes(b)
		if err != nil {
			return string([]rune(string(b))) // invalid input: U+FFFD for each bad byte
		}
		return string(s)
	}
	return string(b)
}

// multiByte lists the multi-byte character sets of MariaDB 10.11 and their
// Go decoders; utf8mb3 and utf8mb4 need none.
var multiByte = map[string]encoding.Encoding{
	"big5":    traditionalchinese.Big5,
	"ujis":    japanese.EUCJP,
	"eucjpms": japanese.EUCJP,
	"sjis":    japanese.ShiftJIS,
	"cp932":   japanese.ShiftJIS,
	"euckr":   korean.EUCKR,
	"gb2312":  simplifiedchinese.GBK,
	"gbk":     simplifiedchinese.GBK,
	"ucs2":    unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
	"utf16":   unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
	"utf16le": unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM),
	"utf32":   utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM),
}

// charsetOf names the character set of collation id coll: from the
// handshake's table, or else (ids above 255, such as the uca1400
// collations) from the source's
// information_schema.COLLATION_CHARACTER_SET_APPLICABILITY (10.10 and
// later list them there, not in COLLATIONS).
func (r *reader) charsetOf(coll uint64) (string, error) {
	if coll < 256 {
		if c, ok := mysql.CollationByID(byte(coll)); ok {
			return c.Charset, nil
		}
	}
	if cs, ok := r.charsets[coll]; ok {
		return cs, nil
	}
	rows, err := r.query("SELECT CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID = " + strconv.FormatUint(coll, 10))
	if err != nil {
		return "", err
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("unknown collation id %d", coll)
	}
	if r.charsets == nil {
		r.charsets = map[uint64]string{}
	}
	r.charsets[coll] = rows[0][0]
	return rows[0][0], nil
}

// decoderFor is the decoder of collation coll's character set, nil for
// UTF-8 and binary.
func (r *reader) decoderFor(coll uint64) (*decoder, error) {
	cs, err := r.charsetOf(coll)
	if err != nil {
		return nil, err
	}
	if cs == "binary" {
		return nil, nil
	}
	return r.decoder(cs)
}

// decoder is charset cs's decoder, nil when its text is UTF-8 already.
func (r *reader) decoder(cs string) (*decoder, error) {
	switch cs {
	case "utf8mb4", "utf8mb3", "utf8", "ascii":
		return nil, nil
	}
	if d, ok := r.decoders[cs]; ok {
		return d, nil
	}
	d := &decoder{}
	if e, ok := multiByte[cs]; ok {
		d.multi = e.NewDecoder()
	} else {
		// A single-byte character set: each byte as the server converts it.
		rows, err := r.query("SELECT seq, HEX(CONVERT(CAST(CHAR(seq) AS CHAR CHARACTER SET " + mysql.QuoteIdent(cs) +
			") USING utf8mb4)) FROM mysql.seq_0_to_255")
		if err != nil {
			return nil, fmt.Errorf("reading character set %s from the server: %w", cs, err)
		}
		if len(rows) != 256 {
			return nil, fmt.Errorf("reading character set %s from the server: %d rows", cs, len(rows))
		}
		d.table = new([256]rune)
		for _, row := range rows {
			i, _ := strconv.Atoi(row[0])
			b, err := hex.DecodeString(row[1])
			ru, _ := utf8.DecodeRune(b)
			if err != nil || len(b) == 0 || (ru == '?' && i != '?') {
				ru = utf8.RuneError
			}
			d.table[i&0xFF] = ru
		}
	}
	if r.decoders == nil {
		r.decoders = map[string]*decoder{}
	}
	r.decoders[cs] = d
	return d, nil
}

// query runs q on the source (a connection of its own, opened on first
// use and kept while the reader runs) and returns its rows as text.
func (r *reader) query(q string) ([][]string, error) {
	if r.conn == nil {
		c, err := client.Connect(r.src.Addr, r.src.User, r.src.Password, "")
		if err != nil {
			return nil, fmt.Errorf("node %s (%s): %w", r.src.Node, r.src.Addr, err)
		}
		r.conn = c
	}
	res, err := r.conn.Execute(q)
	if err != nil {
		r.conn.Close()
		r.conn = nil
		return nil, fmt.Errorf("node %s (%s): %w", r.src.Node, r.src.Addr, err)
	}
	defer res.Close()
	out := make([][]string, len(res.Values))
	for i := range res.Values {
		out[i] = make([]string, len(res.Values[i]))
		for j := range res.Values[i] {
			out[i][j], _ = res.GetString(i, j)
		}
	}
	return out, nil
}
