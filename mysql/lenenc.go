package mysql

import "encoding/binary"

// LenEncIntSize returns the number of bytes AppendLenEncInt uses for v.
func LenEncIntSize(v uint64) int {
	switch {
	case v < 251:
		return 1
	case v < 1<<16:
		return 3
	case v < 1<<24:
		return 4
	default:
		return 9
	}
}

// AppendLenEncInt appends v as a length-encoded integer.
func AppendLenEncInt(b []byte, v uint64) []byte {
	switch {
	case v < 251:
		return append(b, byte(v))
	case v < 1<<16:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v < 1<<24:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	default:
		b = append(b, 0xfe)
		return binary.LittleEndian.AppendUint64(b, v)
	}
}

// AppendLenEncString appends s as a length-encoded string.
func AppendLenEncString(b []byte, s string) []byte {
	b = AppendLenEncInt(b, uint64(len(s)))
	return append(b, s...)
}

// AppendLenEncBytes appends s as a length-encoded string.
func AppendLenEncBytes(b []byte, s []byte) []byte {
	b = AppendLenEncInt(b, uint64(len(s)))
	return append(b, s...)
}

// ReadLenEncInt decodes a length-encoded integer at the start of b. It
// returns the value, whether it was the NULL marker (0xfb), and the number of
// bytes consumed; n == 0 means b is truncated or malformed.
func ReadLenEncInt(b []byte) (v uint64, isNull bool, n int) {
	if len(b) == 0 {
		return 0, false, 0
	}
	switch b[0] {
	case 0xfb:
		return 0, true, 1
	case 0xfc:
		if len(b) < 3 {
			return 0, false, 0
		}
		return uint64(b[1]) | uint64(b[2])<<8, false, 3
	case 0xfd:
		if len(b) < 4 {
			return 0, false, 0
		}
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, false, 4
	case 0xfe:
		if len(b) < 9 {
			return 0, false, 0
		}
		return binary.LittleEndian.Uint64(b[1:9]), false, 9
	case 0xff:
		return 0, false, 0
	default:
		return uint64(b[0]), false, 1
	}
}

// ReadLenEncBytes decodes a length-encoded string at the start of b. The
// returned slice aliases b. n == 0 means b is truncated or malformed.
func ReadLenEncBytes(b []byte) (s []byte, isNull bool, n int) {
	l, isNull, k := ReadLenEncInt(b)
	if k == 0 || isNull {
		return nil, isNull, k
	}
	if uint64(len(b)-k) < l {
		return nil, false, 0
	}
	end := k + int(l)
	return b[k:end], false, end
}

// reader is a bounds-checked cursor over a packet payload used by decoders.
// After the first failure every method returns zero values and ok() is false.
type reader struct {
	b   []byte
	pos int
	bad bool
}

func (r *reader) ok() bool     { return !r.bad }
func (r *reader) rest() []byte { return r.b[r.pos:] }
func (r *reader) more() bool   { return !r.bad && r.pos < len(r.b) }

func (r *reader) byte1() byte {
	if r.bad || r.pos+1 > len(r.b) {
		r.bad = true
		return 0
	}
	v := r.b[r.pos]
	r.pos++
	return v
}

func (r *reader) uint16() uint16 {
	if r.bad || r.pos+2 > len(r.b) {
		r.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.pos:])
	r.pos += 2
	return v
}

func (r *reader) uint32() uint32 {
	if r.bad || r.pos+4 > len(r.b) {
		r.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n < 0 || n > len(r.b)-r.pos {
		r.bad = true
		return nil
	}
	v := r.b[r.pos : r.pos+n]
	r.pos += n
	return v
}

// nulString reads up to the next NUL byte and consumes it.
func (r *reader) nulString() []byte {
	if r.bad {
		return nil
	}
	for i := r.pos; i < len(r.b); i++ {
		if r.b[i] == 0 {
			v := r.b[r.pos:i]
			r.pos = i + 1
			return v
		}
	}
	r.bad = true
	return nil
}

// nulStringOrEOF reads up to the next NUL byte, or to the end of the packet
// when there is none (some clients omit the final NUL).
func (r *reader) nulStringOrEOF() []byte {
	if r.bad {
		return nil
	}
	for i := r.pos; i < len(r.b); i++ {
		if r.b[i] == 0 {
			v := r.b[r.pos:i]
			r.pos = i + 1
			return v
		}
	}
	v := r.b[r.pos:]
	r.pos = len(r.b)
	return v
}

func (r *reader) lenEncInt() uint64 {
	if r.bad {
		return 0
	}
	v, _, n := ReadLenEncInt(r.b[r.pos:])
	if n == 0 {
		r.bad = true
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) lenEncBytes() []byte {
	if r.bad {
		return nil
	}
	v, _, n := ReadLenEncBytes(r.b[r.pos:])
	if n == 0 {
		r.bad = true
		return nil
	}
	r.pos += n
	return v
}
