package server

import "testing"

func TestCompareValues(t *testing.T) {
	tests := []struct {
		k    cmpKind
		a, b string
		want int
	}{
		{cmpSigned, "-5", "3", -1},
		{cmpSigned, "10", "9", 1},
		{cmpUnsigned, "18446744073709551615", "1", 1},
		{cmpDecimal, "-0.50", "0.0", -1},
		{cmpDecimal, "0.00", "-0.0", 0},
		{cmpDecimal, "12.5", "12.50", 0},
		{cmpDecimal, "99.999", "100", -1},
		{cmpDecimal, "-10.1", "-10.01", -1},
		{cmpDecimal, "123456789012345678901234567890.1", "123456789012345678901234567890.01", 1},
		{cmpFloat, "1e10", "9.5e9", 1},
		{cmpTemporal, "2024-01-02 00:00:00", "2023-12-31 23:59:59", 1},
		{cmpTime, "-01:00:00", "00:30:00", -1},
		{cmpTime, "100:00:00", "99:59:59", 1},
		{cmpBinary, "a", "B", 1},
		{cmpBinPad, "ab  ", "ab", 0},
		{cmpGeneralCI, "abc", "ABC", 0},
		{cmpGeneralCI, "élan", "Elan", 0},
		{cmpGeneralCI, "b", "A", 1},
		{cmpGeneralCI, "x ", "X", 0},
		{cmpUnicodeCI, "Ärger", "arger", 0},
		{cmpUnicodeCI, "zebra", "Äpfel", 1},
	}
	for _, tt := range tests {
		if got := compareValues(tt.k, []byte(tt.a), []byte(tt.b)); sign(got) != tt.want {
			t.Errorf("compareValues(%d, %q, %q) = %d, want %d", tt.k, tt.a, tt.b, got, tt.want)
		}
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}
