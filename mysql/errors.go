package mysql

import (
	"errors"
	"fmt"
)

// MySQL error codes the proxy itself produces. Backend errors are forwarded
// with their own codes and never pass through this table.
const (
	ErUnknownError         uint16 = 1105 // ER_UNKNOWN_ERROR: reserved for bugs
	ErAccessDenied         uint16 = 1045 // ER_ACCESS_DENIED_ERROR
	ErDBAccessDenied       uint16 = 1044 // ER_DBACCESS_DENIED_ERROR
	ErNoDB                 uint16 = 1046 // ER_NO_DB_ERROR
	ErBadDB                uint16 = 1049 // ER_BAD_DB_ERROR
	ErUnknownComError      uint16 = 1047 // ER_UNKNOWN_COM_ERROR
	ErSyntax               uint16 = 1064 // ER_PARSE_ERROR
	ErEmptyQuery           uint16 = 1065 // ER_EMPTY_QUERY
	ErNotSupported         uint16 = 1235 // ER_NOT_SUPPORTED_YET
	ErAutoincReadFailed    uint16 = 1467 // ER_AUTOINC_READ_FAILED
	ErNotAllowedCommand    uint16 = 1148 // ER_NOT_ALLOWED_COMMAND
	ErStatementTimeout     uint16 = 1969 // ER_STATEMENT_TIMEOUT
	ErTooManyConnections   uint16 = 1040 // ER_CON_COUNT_ERROR
	ErHandshake            uint16 = 1043 // ER_HANDSHAKE_ERROR
	ErNetPacketTooLarge    uint16 = 1153 // ER_NET_PACKET_TOO_LARGE
	ErNetReadError         uint16 = 1158 // ER_NET_READ_ERROR
	ErNetErrorOnWrite      uint16 = 1160 // ER_NET_ERROR_ON_WRITE
	ErNetPacketsOutOfOrder uint16 = 1156 // ER_NET_PACKETS_OUT_OF_ORDER
	ErUnknownThread        uint16 = 1094 // ER_NO_SUCH_THREAD
	ErKillDenied           uint16 = 1095 // ER_KILL_DENIED_ERROR
	ErUnknownQuery         uint16 = 1957 // ER_NO_SUCH_QUERY: "Unknown query id: %lld"
	ErKillQueryDenied      uint16 = 1979 // ER_KILL_QUERY_DENIED_ERROR: "You are not owner of query %lu"
	ErQueryInterrupted     uint16 = 1317 // ER_QUERY_INTERRUPTED
	ErServerShutdown       uint16 = 1053 // ER_SERVER_SHUTDOWN
	ErHostNotPrivileged    uint16 = 1130 // ER_HOST_NOT_PRIVILEGED
	ErUnknownStmtHandler   uint16 = 1243 // ER_UNKNOWN_STMT_HANDLER
	ErMalformedPacket      uint16 = 1835 // ER_MALFORMED_PACKET
	// Backend failures use the server's "foreign data source" codes: client
	// libraries (libmariadb) reject ERR packets that carry client-range
	// codes (2000-2999) such as 2003 or 2013 as malformed.
	ErConnectFailed             uint16 = 1429 // ER_CONNECT_TO_FOREIGN_DATA_SOURCE: a backend node cannot be reached
	ErServerLost                uint16 = 1430 // ER_QUERY_ON_FOREIGN_DATA_SOURCE: a backend went away mid-query
	ErUnknownCharset            uint16 = 1115 // ER_UNKNOWN_CHARACTER_SET
	ErSpecificAccessDenied      uint16 = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	ErErrorDuringCommit         uint16 = 1180 // ER_ERROR_DURING_COMMIT: a transaction committed on some nodes only
	ErSPDoesNotExist            uint16 = 1305 // ER_SP_DOES_NOT_EXIST: also "SAVEPOINT x does not exist"
	ErWrongArguments            uint16 = 1210 // ER_WRONG_ARGUMENTS: e.g. parameters that do not match a prepared statement
	ErOperandColumns            uint16 = 1241 // ER_OPERAND_COLUMNS
	ErConnectionKilled          uint16 = 1927 // ER_CONNECTION_KILLED
	ErTooManyUserConnections    uint16 = 1203 // ER_TOO_MANY_USER_CONNECTIONS: a proxy user holds its quota of a node's connections
	ErOptionPreventsStatement   uint16 = 1290 // ER_OPTION_PREVENTS_STATEMENT: "The MariaDB server is running with the %s option so it cannot execute this statement"
	ErSubqueryNotSupportedUsing uint16 = 1970 // ER_SUBQUERIES_NOT_SUPPORTED: "%s does not support subqueries or stored functions"
	ErLockWaitTimeout           uint16 = 1205 // ER_LOCK_WAIT_TIMEOUT: also a statement held past a cutover's bound
	ErLockDeadlock              uint16 = 1213 // ER_LOCK_DEADLOCK: the server rolled the transaction back
	ErXAERNota                  uint16 = 1397 // ER_XAER_NOTA: "XAER_NOTA: Unknown XID"
	ErXAERRmfail                uint16 = 1399 // ER_XAER_RMFAIL: the command is not allowed in the XA state
	ErXARBRollback              uint16 = 1402 // ER_XA_RBROLLBACK: "XA_RBROLLBACK: Transaction branch was rolled back"
	ErTooManyRows               uint16 = 1172 // ER_TOO_MANY_ROWS: "Result consisted of more than one row"
)

// sqlStates maps the codes above to their SQLSTATE. Codes not listed use HY000.
var sqlStates = map[uint16]string{
	ErAccessDenied:              "28000",
	ErTooManyRows:               "42000",
	ErDBAccessDenied:            "42000",
	ErNoDB:                      "3D000",
	ErBadDB:                     "42000",
	ErUnknownComError:           "08S01",
	ErSyntax:                    "42000",
	ErEmptyQuery:                "42000",
	ErNotSupported:              "42000",
	ErNotAllowedCommand:         "42000",
	ErStatementTimeout:          "70100",
	ErTooManyConnections:        "08004",
	ErHandshake:                 "08S01",
	ErNetPacketTooLarge:         "08S01",
	ErNetReadError:              "08S01",
	ErNetErrorOnWrite:           "08S01",
	ErNetPacketsOutOfOrder:      "08S01",
	ErQueryInterrupted:          "70100",
	ErServerShutdown:            "08S01",
	ErUnknownCharset:            "42000",
	ErSpecificAccessDenied:      "42000",
	ErSPDoesNotExist:            "42000",
	ErOperandColumns:            "21000",
	ErConnectionKilled:          "70100",
	ErTooManyUserConnections:    "42000",
	ErOptionPreventsStatement:   "HY000",
	ErSubqueryNotSupportedUsing: "42000",
	ErLockWaitTimeout:           "HY000",
	ErLockDeadlock:              "40001",
	ErXAERNota:                  "XAE04",
	ErXAERRmfail:                "XAE07",
	ErXARBRollback:              "XA100",
}

// SQLState returns the SQLSTATE MySQL uses for code, or HY000.
func SQLState(code uint16) string {
	if s, ok := sqlStates[code]; ok {
		return s
	}
	return "HY000"
}

// SQLError is an error with a MySQL error code and SQLSTATE. It is the one
// error type that crosses the client write boundary: the session finds it
// with errors.As, so wrapping with %w never loses the code.
type SQLError struct {
	Code    uint16
	State   string
	Message string
}

// NewError returns an SQLError with code, the code's SQLSTATE and a message
// formatted like fmt.Sprintf.
func NewError(code uint16, format string, args ...any) *SQLError {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &SQLError{Code: code, State: SQLState(code), Message: msg}
}

func (e *SQLError) Error() string {
	return fmt.Sprintf("ERROR %d (%s): %s", e.Code, e.State, e.Message)
}

// AsSQLError returns the SQLError inside err, or a 1105 error carrying err's
// text when err has no code.
func AsSQLError(err error) *SQLError {
	if err == nil {
		return nil
	}
	var se *SQLError
	if errors.As(err, &se) {
		return se
	}
	return NewError(ErUnknownError, "%s", err.Error())
}

// ErrBadPacket is returned by decoders on truncated or inconsistent
// input: the error value of code ErMalformedPacket (ER_MALFORMED_PACKET,
// 1835), named apart from the code so the two are not mistaken.
var ErrBadPacket = NewError(ErMalformedPacket, "Malformed communication packet.")
