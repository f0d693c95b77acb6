package mysql

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// lenEncIntCases are the encodings at every boundary of the length-encoded
// integer format (Protocol::LengthEncodedInteger).
var lenEncIntCases = []struct {
	v    uint64
	wire []byte
}{
	{0, []byte{0x00}},
	{1, []byte{0x01}},
	{250, []byte{0xfa}},
	{251, []byte{0xfc, 0xfb, 0x00}},
	{252, []byte{0xfc, 0xfc, 0x00}},
	{0xffff, []byte{0xfc, 0xff, 0xff}},
	{0x10000, []byte{0xfd, 0x00, 0x00, 0x01}},
	{0x123456, []byte{0xfd, 0x56, 0x34, 0x12}},
	{0xffffff, []byte{0xfd, 0xff, 0xff, 0xff}},
	{0x1000000, []byte{0xfe, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00}},
	{0x0102030405060708, []byte{0xfe, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}},
	{math.MaxUint64, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
}

func TestLenEncInt(t *testing.T) {
	for _, tc := range lenEncIntCases {
		got := AppendLenEncInt([]byte{0xaa}, tc.v)
		if !bytes.Equal(got[1:], tc.wire) || got[0] != 0xaa {
			t.Errorf("AppendLenEncInt(%#x) = % x, want aa % x", tc.v, got, tc.wire)
		}
		if n := LenEncIntSize(tc.v); n != len(tc.wire) {
			t.Errorf("LenEncIntSize(%#x) = %d, want %d", tc.v, n, len(tc.wire))
		}
		// Trailing bytes must be left alone.
		v, isNull, n := ReadLenEncInt(append(append([]byte(nil), tc.wire...), 0x55, 0x66))
		if v != tc.v || isNull || n != len(tc.wire) {
			t.Errorf("ReadLenEncInt(% x) = %#x, %v, %d; want %#x, false, %d", tc.wire, v, isNull, n, tc.v, len(tc.wire))
		}
		// Every strict prefix is truncated.
		for i := 0; i < len(tc.wire); i++ {
			if v, isNull, n := ReadLenEncInt(tc.wire[:i]); n != 0 || v != 0 || isNull {
				t.Errorf("ReadLenEncInt(% x) = %#x, %v, %d; want truncated", tc.wire[:i], v, isNull, n)
			}
		}
	}
}

func TestReadLenEncIntMarkers(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		v      uint64
		isNull bool
		n      int
	}{
		{"NULL", []byte{0xfb}, 0, true, 1},
		{"NULL followed by data", []byte{0xfb, 0x01}, 0, true, 1},
		{"0xff is not an integer (ERR header)", []byte{0xff, 0x00, 0x00}, 0, false, 0},
		{"empty", nil, 0, false, 0},
		// Non-minimal encodings are accepted as they are on the wire.
		{"non-minimal 2-byte", []byte{0xfc, 0x05, 0x00}, 5, false, 3},
		{"non-minimal 8-byte", []byte{0xfe, 0x05, 0, 0, 0, 0, 0, 0, 0}, 5, false, 9},
	}
	for _, tc := range tests {
		v, isNull, n := ReadLenEncInt(tc.in)
		if v != tc.v || isNull != tc.isNull || n != tc.n {
			t.Errorf("%s: ReadLenEncInt(% x) = %d, %v, %d; want %d, %v, %d", tc.name, tc.in, v, isNull, n, tc.v, tc.isNull, tc.n)
		}
	}
}

func TestLenEncString(t *testing.T) {
	long := strings.Repeat("x", 251)
	tests := []struct {
		s    string
		wire []byte
	}{
		{"", []byte{0x00}},
		{"a", []byte{0x01, 'a'}},
		{"def", []byte{0x03, 'd', 'e', 'f'}},
		{strings.Repeat("y", 250), cat([]byte{0xfa}, bytes.Repeat([]byte("y"), 250))},
		{long, cat([]byte{0xfc, 0xfb, 0x00}, []byte(long))},
		{strings.Repeat("z", 0x10000), cat([]byte{0xfd, 0x00, 0x00, 0x01}, bytes.Repeat([]byte("z"), 0x10000))},
	}
	for _, tc := range tests {
		if got := AppendLenEncString(nil, tc.s); !bytes.Equal(got, tc.wire) {
			t.Errorf("AppendLenEncString(len %d) = % .16x..., want % .16x...", len(tc.s), got, tc.wire)
		}
		if got := AppendLenEncBytes(nil, []byte(tc.s)); !bytes.Equal(got, tc.wire) {
			t.Errorf("AppendLenEncBytes(len %d) = % .16x..., want % .16x...", len(tc.s), got, tc.wire)
		}
		in := append(append([]byte(nil), tc.wire...), 0x99)
		s, isNull, n := ReadLenEncBytes(in)
		if string(s) != tc.s || isNull || n != len(tc.wire) {
			t.Errorf("ReadLenEncBytes(len %d) = len %d, %v, %d; want len %d, false, %d", len(tc.s), len(s), isNull, n, len(tc.s), len(tc.wire))
		}
		if len(s) > 0 && &s[0] != &in[n-len(s)] {
			t.Errorf("ReadLenEncBytes(len %d) copied the value; it must alias the input", len(tc.s))
		}
		// Truncating the value by one byte is malformed.
		if s, isNull, n := ReadLenEncBytes(tc.wire[:len(tc.wire)-1]); n != 0 || s != nil || isNull {
			t.Errorf("ReadLenEncBytes(truncated len %d) = %q, %v, %d; want nil, false, 0", len(tc.s), s, isNull, n)
		}
	}
}

func TestReadLenEncBytesMarkers(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		s      []byte
		isNull bool
		n      int
	}{
		{"NULL", []byte{0xfb, 'x'}, nil, true, 1},
		{"empty input", nil, nil, false, 0},
		{"bad length", []byte{0xff, 'x'}, nil, false, 0},
		{"truncated length", []byte{0xfc, 0x01}, nil, false, 0},
		{"length beyond input", []byte{0x05, 'a', 'b'}, nil, false, 0},
		{"huge length", []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 'a'}, nil, false, 0},
		{"length just below the sign bit", []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'a'}, nil, false, 0},
		{"empty string", []byte{0x00, 'x'}, []byte{}, false, 1},
	}
	for _, tc := range tests {
		s, isNull, n := ReadLenEncBytes(tc.in)
		if !bytes.Equal(s, tc.s) || (s == nil) != (tc.s == nil) || isNull != tc.isNull || n != tc.n {
			t.Errorf("%s: ReadLenEncBytes(% x) = %#v, %v, %d; want %#v, %v, %d", tc.name, tc.in, s, isNull, n, tc.s, tc.isNull, tc.n)
		}
	}
}

// TestReaderBytesOverflow checks the bounds check of the decoders' cursor
// with a length so large that pos+n overflows int.
func TestReaderBytesOverflow(t *testing.T) {
	for _, n := range []int{math.MaxInt, math.MaxInt - 1, -1, math.MinInt} {
		r := reader{b: []byte("abcdef"), pos: 2}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("reader.bytes(%d) at pos 2 of 6 panicked: %v", n, p)
				}
			}()
			if got := r.bytes(n); got != nil || r.ok() {
				t.Errorf("reader.bytes(%d) = %q, ok %v; want nil, not ok", n, got, r.ok())
			}
		}()
	}
}
