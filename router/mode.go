package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/format"
	tmysql "github.com/pingcap/tidb/pkg/parser/mysql"
)

// Mode is what the router must know of a session's sql_mode: the flags
// that change how the server reads statement text. The router parses with
// them and restores rewritten statements so that the server, in the same
// mode, reads what the client meant; otherwise a string the router reads
// one way could be read another way by the server (under
// NO_BACKSLASH_ESCAPES a backslash does not escape the quote after it).
type Mode uint8

const (
	ModeANSIQuotes         Mode = 1 << iota // "x" is an identifier
	ModeNoBackslashEscapes                  // \ is an ordinary character in strings
	ModePipesAsConcat                       // || is CONCAT
	ModeHighNotPrecedence                   // NOT a BETWEEN b AND c is (NOT a) BETWEEN ...
	ModeIgnoreSpace                         // a function name may be followed by spaces
	// ModeForeign is a grammar the parser does not have (MariaDB's
	// sql_mode=ORACLE): statements on sharded tables are refused.
	ModeForeign
	// ModeNoAutoValueOnZero: 0 in an AUTO_INCREMENT column is stored as
	// 0, not replaced by the next value (global sequences follow it).
	ModeNoAutoValueOnZero
)

// ParseMode reads the value of sql_mode as the server reports it (a
// comma-separated list of mode names, combinations such as ANSI already
// expanded by the server, though they are expanded here as well).
func ParseMode(sqlMode string) Mode {
	var m Mode
	for name := range strings.SplitSeq(sqlMode, ",") {
		switch strings.ToUpper(strings.TrimSpace(name)) {
		case "ANSI_QUOTES":
			m |= ModeANSIQuotes
		case "NO_BACKSLASH_ESCAPES":
			m |= ModeNoBackslashEscapes
		case "PIPES_AS_CONCAT":
			m |= ModePipesAsConcat
		case "HIGH_NOT_PRECEDENCE":
			m |= ModeHighNotPrecedence
		case "IGNORE_SPACE":
			m |= ModeIgnoreSpace
		case "NO_AUTO_VALUE_ON_ZERO":
			m |= ModeNoAutoValueOnZero
		case "ANSI", "DB2", "MAXDB", "MSSQL", "POSTGRESQL":
			m |= ModeANSIQuotes | ModePipesAsConcat | ModeIgnoreSpace
		case "ORACLE":
			m |= ModeANSIQuotes | ModePipesAsConcat | ModeIgnoreSpace | ModeForeign
		}
	}
	return m
}

// parserMode is m as the parser's sql_mode (its default plus m's flags).
func (m Mode) parserMode() tmysql.SQLMode {
	pm := defaultParserMode
	if m&ModeANSIQuotes != 0 {
		pm |= tmysql.ModeANSIQuotes
	}
	if m&ModeNoBackslashEscapes != 0 {
		pm |= tmysql.ModeNoBackslashEscapes
	}
	if m&ModePipesAsConcat != 0 {
		pm |= tmysql.ModePipesAsConcat
	}
	if m&ModeHighNotPrecedence != 0 {
		pm |= tmysql.ModeHighNotPrecedence
	}
	if m&ModeIgnoreSpace != 0 {
		pm |= tmysql.ModeIgnoreSpace
	}
	return pm
}

var defaultParserMode, _ = tmysql.GetSQLMode(tmysql.DefaultSQLMode)

// restoreFlags are the flags that write strings back as the server reads
// them in mode m: the parser's defaults (single-quoted strings, a quote
// in them doubled, back-quoted names) plus backslash escaping unless
// backslashes are ordinary characters; without it a string holding a
// backslash would be restored as a different string.
func (m Mode) restoreFlags() format.RestoreFlags {
	if m&ModeNoBackslashEscapes != 0 {
		return format.DefaultRestoreFlags
	}
	return format.DefaultRestoreFlags | format.RestoreStringEscapeBackslash
}
