package mysql

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"sort"
	"strings"
	"testing"
)

// errorCodes lists every exported error code with the code and SQLSTATE
// MySQL uses for it. TestErrorCodesComplete keeps it in step with
// errors.go.
var errorCodes = []struct {
	name  string
	code  uint16
	got   uint16
	state string
}{
	{"ErUnknownError", 1105, ErUnknownError, "HY000"},
	{"ErAccessDenied", 1045, ErAccessDenied, "28000"},
	{"ErDBAccessDenied", 1044, ErDBAccessDenied, "42000"},
	{"ErNoDB", 1046, ErNoDB, "3D000"},
	{"ErBadDB", 1049, ErBadDB, "42000"},
	{"ErUnknownComError", 1047, ErUnknownComError, "08S01"},
	{"ErSyntax", 1064, ErSyntax, "42000"},
	{"ErEmptyQuery", 1065, ErEmptyQuery, "42000"},
	{"ErNotSupported", 1235, ErNotSupported, "42000"},
	{"ErAutoincReadFailed", 1467, ErAutoincReadFailed, "HY000"},
	{"ErNotAllowedCommand", 1148, ErNotAllowedCommand, "42000"},
	{"ErStatementTimeout", 1969, ErStatementTimeout, "70100"},
	{"ErTooManyConnections", 1040, ErTooManyConnections, "08004"},
	{"ErHandshake", 1043, ErHandshake, "08S01"},
	{"ErNetPacketTooLarge", 1153, ErNetPacketTooLarge, "08S01"},
	{"ErNetReadError", 1158, ErNetReadError, "08S01"},
	{"ErNetErrorOnWrite", 1160, ErNetErrorOnWrite, "08S01"},
	{"ErNetPacketsOutOfOrder", 1156, ErNetPacketsOutOfOrder, "08S01"},
	{"ErUnknownThread", 1094, ErUnknownThread, "HY000"},
	{"ErKillDenied", 1095, ErKillDenied, "HY000"},
	{"ErUnknownQuery", 1957, ErUnknownQuery, "HY000"},
	{"ErKillQueryDenied", 1979, ErKillQueryDenied, "HY000"},
	{"ErOperandColumns", 1241, ErOperandColumns, "21000"},
	{"ErConnectionKilled", 1927, ErConnectionKilled, "70100"},
	{"ErTooManyUserConnections", 1203, ErTooManyUserConnections, "42000"},
	{"ErOptionPreventsStatement", 1290, ErOptionPreventsStatement, "HY000"},
	{"ErQueryInterrupted", 1317, ErQueryInterrupted, "70100"},
	{"ErServerShutdown", 1053, ErServerShutdown, "08S01"},
	{"ErHostNotPrivileged", 1130, ErHostNotPrivileged, "HY000"},
	{"ErUnknownStmtHandler", 1243, ErUnknownStmtHandler, "HY000"},
	{"ErMalformedPacket", 1835, ErMalformedPacket, "HY000"},
	{"ErConnectFailed", 1429, ErConnectFailed, "HY000"},
	{"ErServerLost", 1430, ErServerLost, "HY000"},
	{"ErUnknownCharset", 1115, ErUnknownCharset, "42000"},
	{"ErSpecificAccessDenied", 1227, ErSpecificAccessDenied, "42000"},
	{"ErErrorDuringCommit", 1180, ErErrorDuringCommit, "HY000"},
	{"ErSPDoesNotExist", 1305, ErSPDoesNotExist, "42000"},
	{"ErWrongArguments", 1210, ErWrongArguments, "HY000"},
	{"ErSubqueryNotSupportedUsing", 1970, ErSubqueryNotSupportedUsing, "42000"},
	{"ErLockWaitTimeout", 1205, ErLockWaitTimeout, "HY000"},
	{"ErLockDeadlock", 1213, ErLockDeadlock, "40001"},
	{"ErXAERNota", 1397, ErXAERNota, "XAE04"},
	{"ErXAERRmfail", 1399, ErXAERRmfail, "XAE07"},
	{"ErXARBRollback", 1402, ErXARBRollback, "XA100"},
	{"ErTooManyRows", 1172, ErTooManyRows, "42000"},
}

func TestErrorCodes(t *testing.T) {
	for _, e := range errorCodes {
		if e.got != e.code {
			t.Errorf("%s = %d, want %d", e.name, e.got, e.code)
		}
		if st := SQLState(e.code); st != e.state {
			t.Errorf("SQLState(%s) = %s, want %s", e.name, st, e.state)
		}
		if se := NewError(e.code, "x"); se.State != e.state {
			t.Errorf("NewError(%s).State = %s, want %s", e.name, se.State, e.state)
		}
	}
	if st := SQLState(9999); st != "HY000" {
		t.Errorf("SQLState(9999) = %s, want HY000", st)
	}
}

// TestErrorCodesComplete fails when errors.go gains an exported Er* code
// that errorCodes does not list.
func TestErrorCodesComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if n.IsExported() && strings.HasPrefix(n.Name, "Er") {
					declared = append(declared, n.Name)
				}
			}
		}
	}
	listed := map[string]bool{}
	for _, e := range errorCodes {
		listed[e.name] = true
	}
	sort.Strings(declared)
	for _, n := range declared {
		if !listed[n] {
			t.Errorf("%s is declared in errors.go but not listed in errorCodes", n)
		}
		delete(listed, n)
	}
	for n := range listed {
		t.Errorf("errorCodes lists %s, which errors.go does not declare", n)
	}
}

// TestErrorValues lists the package's exported error values with their
// codes and SQLSTATEs.
func TestErrorValues(t *testing.T) {
	tests := []struct {
		name  string
		err   *SQLError
		code  uint16
		state string
	}{
		{"ErrBadPacket", ErrBadPacket, 1835, "HY000"},
		{"ErrPacketTooLarge", ErrPacketTooLarge, 1153, "08S01"},
		{"ErrOutOfOrder", ErrOutOfOrder, 1156, "08S01"},
	}
	for _, tc := range tests {
		if tc.err.Code != tc.code || tc.err.State != tc.state || tc.err.Message == "" {
			t.Errorf("%s = %d (%s) %q, want %d (%s) with a message", tc.name, tc.err.Code, tc.err.State, tc.err.Message, tc.code, tc.state)
		}
	}
}

func TestNewError(t *testing.T) {
	tests := []struct {
		err  *SQLError
		want SQLError
		text string
	}{
		{
			NewError(ErAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", "bob", "app-host", "YES"),
			SQLError{1045, "28000", "Access denied for user 'bob'@'app-host' (using password: YES)"},
			"ERROR 1045 (28000): Access denied for user 'bob'@'app-host' (using password: YES)",
		},
		{
			NewError(ErNoDB, "No database selected"),
			SQLError{1046, "3D000", "No database selected"},
			"ERROR 1046 (3D000): No database selected",
		},
		{
			// Arguments are formatted, not interpreted as verbs themselves.
			NewError(ErSyntax, "near '%s' at line %d", "100%d", 1),
			SQLError{1064, "42000", "near '100%d' at line 1"},
			"ERROR 1064 (42000): near '100%d' at line 1",
		},
		{
			NewError(ErNotSupported, "%s is not supported: %s", "LOCK TABLES", "tables live on several shards"),
			SQLError{1235, "42000", "LOCK TABLES is not supported: tables live on several shards"},
			"ERROR 1235 (42000): LOCK TABLES is not supported: tables live on several shards",
		},
	}
	for _, tc := range tests {
		if *tc.err != tc.want {
			t.Errorf("NewError = %+v, want %+v", *tc.err, tc.want)
		}
		if got := tc.err.Error(); got != tc.text {
			t.Errorf("Error() = %q, want %q", got, tc.text)
		}
	}
}

func TestAsSQLError(t *testing.T) {
	base := NewError(ErNoDB, "No database selected")
	wrapped := fmt.Errorf("session 7: %w", fmt.Errorf("route: %w", base))
	if got := AsSQLError(wrapped); got != base {
		t.Errorf("AsSQLError(wrapped) = %v, want the wrapped %v", got, base)
	}
	var se *SQLError
	if !errors.As(wrapped, &se) || se.Code != ErNoDB {
		t.Errorf("errors.As(wrapped) = %v", se)
	}
	joined := errors.Join(io.EOF, base)
	if got := AsSQLError(joined); got != base {
		t.Errorf("AsSQLError(errors.Join) = %v, want %v", got, base)
	}

	plain := fmt.Errorf("dial tcp shard-1:3306: %w", io.ErrUnexpectedEOF)
	got := AsSQLError(plain)
	if got.Code != 1105 || got.State != "HY000" || got.Message != plain.Error() {
		t.Errorf("AsSQLError(plain) = %+v, want 1105 (HY000) %q", *got, plain.Error())
	}
	// A message with verbs is carried verbatim.
	if got := AsSQLError(errors.New("100% broken")); got.Message != "100% broken" {
		t.Errorf("AsSQLError message = %q", got.Message)
	}
}
