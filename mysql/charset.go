package mysql

import "strings"

// Collation describes a collation id as sent in the handshake and in
// column definitions.
type Collation struct {
	ID      byte
	Charset string
	Name    string // "" when the backend should use the charset's default
}

// collations lists the ids clients commonly send. Unknown ids fall back to
// the proxy's default character set.
var collations = []Collation{
	{1, "big5", "big5_chinese_ci"},
	{8, "latin1", "latin1_swedish_ci"},
	{11, "ascii", "ascii_general_ci"},
	{13, "sjis", "sjis_japanese_ci"},
	{19, "euckr", "euckr_korean_ci"},
	{24, "gb2312", "gb2312_chinese_ci"},
	{28, "gbk", "gbk_chinese_ci"},
	{33, "utf8mb3", "utf8mb3_general_ci"},
	{35, "ucs2", "ucs2_general_ci"},
	{45, "utf8mb4", "utf8mb4_general_ci"},
	{46, "utf8mb4", "utf8mb4_bin"},
	{47, "latin1", "latin1_bin"},
	{48, "latin1", "latin1_general_ci"},
	{51, "cp1251", "cp1251_general_ci"},
	{54, "utf16", "utf16_general_ci"},
	{60, "utf32", "utf32_general_ci"},
	{63, "binary", "binary"},
	{65, "ascii", "ascii_bin"},
	{83, "utf8mb3", "utf8mb3_bin"},
	{192, "utf8mb3", "utf8mb3_unicode_ci"},
	{224, "utf8mb4", "utf8mb4_unicode_ci"},
	{246, "utf8mb4", "utf8mb4_unicode_520_ci"},
	// MySQL 8 clients default to utf8mb4_0900_ai_ci, which MariaDB lacks:
	// use the charset's default collation on the backend.
	{255, "utf8mb4", ""},
}

var collationByID = func() map[byte]Collation {
	m := make(map[byte]Collation, len(collations))
	for _, c := range collations {
		m[c.ID] = c
	}
	return m
}()

// CollationByID returns the collation with the given id.
func CollationByID(id byte) (Collation, bool) {
	c, ok := collationByID[id]
	return c, ok
}

// DefaultCollation returns the default collation id for a character set
// name ("utf8" means utf8mb3, as in MariaDB).
func DefaultCollation(charset string) (byte, bool) {
	cs := strings.ToLower(charset)
	if cs == "utf8" {
		cs = "utf8mb3"
	}
	for _, c := range collations {
		if c.Charset == cs && c.Name != "" {
			return c.ID, true
		}
	}
	return 0, false
}

// SetNamesSQL returns the SET NAMES statement that brings a backend
// connection to collation id.
func (c Collation) SetNamesSQL() string {
	if c.Name == "" {
		return "SET NAMES " + c.Charset
	}
	return "SET NAMES " + c.Charset + " COLLATE " + c.Name
}

// CollationByName returns the id of a character set's collation: the one
// named, or the character set's default when collation is "". ok is false
// for names the proxy does not know, or a collation of another character
// set.
func CollationByName(charset, collation string) (byte, bool) {
	cs := strings.ToLower(charset)
	if cs == "utf8" {
		cs = "utf8mb3"
	}
	if collation == "" {
		return DefaultCollation(cs)
	}
	name := strings.ToLower(collation)
	if strings.HasPrefix(name, "utf8_") {
		name = "utf8mb3_" + name[len("utf8_"):]
	}
	for _, c := range collations {
		if c.Name == name && c.Charset == cs {
			return c.ID, true
		}
	}
	return 0, false
}
