package mysql

// Command bytes (the first payload byte of a client command packet).
const (
	ComSleep            byte = 0x00 // COM_SLEEP
	ComQuit             byte = 0x01 // COM_QUIT
	ComInitDB           byte = 0x02 // COM_INIT_DB
	ComQuery            byte = 0x03 // COM_QUERY
	ComFieldList        byte = 0x04 // COM_FIELD_LIST
	ComCreateDB         byte = 0x05 // COM_CREATE_DB
	ComDropDB           byte = 0x06 // COM_DROP_DB
	ComRefresh          byte = 0x07 // COM_REFRESH
	ComShutdown         byte = 0x08 // COM_SHUTDOWN
	ComStatistics       byte = 0x09 // COM_STATISTICS
	ComProcessInfo      byte = 0x0a // COM_PROCESS_INFO
	ComConnect          byte = 0x0b // COM_CONNECT
	ComProcessKill      byte = 0x0c // COM_PROCESS_KILL
	ComDebug            byte = 0x0d // COM_DEBUG
	ComPing             byte = 0x0e // COM_PING
	ComTime             byte = 0x0f // COM_TIME
	ComDelayedInsert    byte = 0x10 // COM_DELAYED_INSERT
	ComChangeUser       byte = 0x11 // COM_CHANGE_USER
	ComBinlogDump       byte = 0x12 // COM_BINLOG_DUMP
	ComTableDump        byte = 0x13 // COM_TABLE_DUMP
	ComConnectOut       byte = 0x14 // COM_CONNECT_OUT
	ComRegisterSlave    byte = 0x15 // COM_REGISTER_SLAVE
	ComStmtPrepare      byte = 0x16 // COM_STMT_PREPARE
	ComStmtExecute      byte = 0x17 // COM_STMT_EXECUTE
	ComStmtSendLongData byte = 0x18 // COM_STMT_SEND_LONG_DATA
	ComStmtClose        byte = 0x19 // COM_STMT_CLOSE
	ComStmtReset        byte = 0x1a // COM_STMT_RESET
	ComSetOption        byte = 0x1b // COM_SET_OPTION
	ComStmtFetch        byte = 0x1c // COM_STMT_FETCH
	ComDaemon           byte = 0x1d // COM_DAEMON
	ComBinlogDumpGTID   byte = 0x1e // COM_BINLOG_DUMP_GTID
	ComResetConnection  byte = 0x1f // COM_RESET_CONNECTION
)

// Capability flags exchanged in the handshake.
const (
	ClientLongPassword               uint32 = 1 << 0  // CLIENT_LONG_PASSWORD (CLIENT_MYSQL in MariaDB)
	ClientFoundRows                  uint32 = 1 << 1  // CLIENT_FOUND_ROWS
	ClientLongFlag                   uint32 = 1 << 2  // CLIENT_LONG_FLAG
	ClientConnectWithDB              uint32 = 1 << 3  // CLIENT_CONNECT_WITH_DB
	ClientNoSchema                   uint32 = 1 << 4  // CLIENT_NO_SCHEMA
	ClientCompress                   uint32 = 1 << 5  // CLIENT_COMPRESS
	ClientODBC                       uint32 = 1 << 6  // CLIENT_ODBC
	ClientLocalFiles                 uint32 = 1 << 7  // CLIENT_LOCAL_FILES
	ClientIgnoreSpace                uint32 = 1 << 8  // CLIENT_IGNORE_SPACE
	ClientProtocol41                 uint32 = 1 << 9  // CLIENT_PROTOCOL_41
	ClientInteractive                uint32 = 1 << 10 // CLIENT_INTERACTIVE
	ClientSSL                        uint32 = 1 << 11 // CLIENT_SSL
	ClientIgnoreSigpipe              uint32 = 1 << 12 // CLIENT_IGNORE_SIGPIPE
	ClientTransactions               uint32 = 1 << 13 // CLIENT_TRANSACTIONS
	ClientReserved                   uint32 = 1 << 14 // CLIENT_RESERVED
	ClientSecureConnection           uint32 = 1 << 15 // CLIENT_SECURE_CONNECTION (CLIENT_RESERVED2)
	ClientMultiStatements            uint32 = 1 << 16 // CLIENT_MULTI_STATEMENTS
	ClientMultiResults               uint32 = 1 << 17 // CLIENT_MULTI_RESULTS
	ClientPSMultiResults             uint32 = 1 << 18 // CLIENT_PS_MULTI_RESULTS
	ClientPluginAuth                 uint32 = 1 << 19 // CLIENT_PLUGIN_AUTH
	ClientConnectAttrs               uint32 = 1 << 20 // CLIENT_CONNECT_ATTRS
	ClientPluginAuthLenencClientData uint32 = 1 << 21 // CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
	ClientCanHandleExpiredPasswords  uint32 = 1 << 22 // CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS
	ClientSessionTrack               uint32 = 1 << 23 // CLIENT_SESSION_TRACK
	ClientDeprecateEOF               uint32 = 1 << 24 // CLIENT_DEPRECATE_EOF
)

// MariaDB's extended capabilities (bits 32 and up of its capability flags,
// shifted down by 32): a MariaDB server greets without CLIENT_MYSQL
// (ClientLongPassword) and sends them in the last 4 of the greeting's 10
// reserved bytes; a client that leaves CLIENT_MYSQL unset answers with its
// own in the last 4 of the response's 23 reserved bytes.
const (
	// MariaDBClientExtendedMetadata (MARIADB_CLIENT_EXTENDED_METADATA):
	// column definitions carry one more length-encoded field after
	// org_name, the packed extended metadata (ColumnExtType ...).
	MariaDBClientExtendedMetadata uint32 = 1 << 3
)

// Kinds of a column's extended metadata (MARIADB_FIELD_ATTR_*).
const (
	ColumnExtType   byte = 0 // MARIADB_FIELD_ATTR_DATA_TYPE_NAME: point, inet6, uuid ...
	ColumnExtFormat byte = 1 // MARIADB_FIELD_ATTR_FORMAT_NAME: json
)

// Server status flags carried by OK and EOF packets.
const (
	StatusInTrans            uint16 = 0x0001 // SERVER_STATUS_IN_TRANS
	StatusAutocommit         uint16 = 0x0002 // SERVER_STATUS_AUTOCOMMIT
	StatusMoreResultsExists  uint16 = 0x0008 // SERVER_MORE_RESULTS_EXISTS
	StatusNoGoodIndexUsed    uint16 = 0x0010 // SERVER_STATUS_NO_GOOD_INDEX_USED
	StatusNoIndexUsed        uint16 = 0x0020 // SERVER_STATUS_NO_INDEX_USED
	StatusCursorExists       uint16 = 0x0040 // SERVER_STATUS_CURSOR_EXISTS
	StatusLastRowSent        uint16 = 0x0080 // SERVER_STATUS_LAST_ROW_SENT
	StatusDBDropped          uint16 = 0x0100 // SERVER_STATUS_DB_DROPPED
	StatusNoBackslashEscapes uint16 = 0x0200 // SERVER_STATUS_NO_BACKSLASH_ESCAPES
	StatusMetadataChanged    uint16 = 0x0400 // SERVER_STATUS_METADATA_CHANGED
	StatusQueryWasSlow       uint16 = 0x0800 // SERVER_QUERY_WAS_SLOW
	StatusPSOutParams        uint16 = 0x1000 // SERVER_PS_OUT_PARAMS
	StatusInTransReadonly    uint16 = 0x2000 // SERVER_STATUS_IN_TRANS_READONLY
	StatusSessionStateChange uint16 = 0x4000 // SERVER_SESSION_STATE_CHANGED
	StatusAnsiQuotes         uint16 = 0x8000 // SERVER_STATUS_ANSI_QUOTES (MariaDB): sql_mode has ANSI_QUOTES

	// StatusSession are the flags that describe the session rather than
	// the statement that answered: they hold until a statement changes
	// them, so an answer the proxy composes carries them, and only them.
	StatusSession = StatusInTrans | StatusAutocommit | StatusNoBackslashEscapes | StatusInTransReadonly | StatusAnsiQuotes
)

// Packet header bytes.
const (
	OKHeader          byte = 0x00 // OK packet
	LocalInfileHeader byte = 0xfb // LOCAL INFILE request
	EOFHeader         byte = 0xfe // EOF packet, or OK packet with CLIENT_DEPRECATE_EOF
	ErrHeader         byte = 0xff // ERR packet
	AuthMoreData      byte = 0x01 // AuthMoreData during authentication
	AuthSwitch        byte = 0xfe // AuthSwitchRequest during authentication
)

// COM_SET_OPTION values.
const (
	OptionMultiStatementsOn  uint16 = 0 // MYSQL_OPTION_MULTI_STATEMENTS_ON
	OptionMultiStatementsOff uint16 = 1 // MYSQL_OPTION_MULTI_STATEMENTS_OFF
)

// Column types (enum_field_types).
const (
	TypeDecimal    byte = 0x00 // MYSQL_TYPE_DECIMAL
	TypeTiny       byte = 0x01 // MYSQL_TYPE_TINY
	TypeShort      byte = 0x02 // MYSQL_TYPE_SHORT
	TypeLong       byte = 0x03 // MYSQL_TYPE_LONG
	TypeFloat      byte = 0x04 // MYSQL_TYPE_FLOAT
	TypeDouble     byte = 0x05 // MYSQL_TYPE_DOUBLE
	TypeNull       byte = 0x06 // MYSQL_TYPE_NULL
	TypeTimestamp  byte = 0x07 // MYSQL_TYPE_TIMESTAMP
	TypeLongLong   byte = 0x08 // MYSQL_TYPE_LONGLONG
	TypeInt24      byte = 0x09 // MYSQL_TYPE_INT24
	TypeDate       byte = 0x0a // MYSQL_TYPE_DATE
	TypeTime       byte = 0x0b // MYSQL_TYPE_TIME
	TypeDatetime   byte = 0x0c // MYSQL_TYPE_DATETIME
	TypeYear       byte = 0x0d // MYSQL_TYPE_YEAR
	TypeVarchar    byte = 0x0f // MYSQL_TYPE_VARCHAR
	TypeBit        byte = 0x10 // MYSQL_TYPE_BIT
	TypeJSON       byte = 0xf5 // MYSQL_TYPE_JSON
	TypeNewDecimal byte = 0xf6 // MYSQL_TYPE_NEWDECIMAL
	TypeEnum       byte = 0xf7 // MYSQL_TYPE_ENUM
	TypeSet        byte = 0xf8 // MYSQL_TYPE_SET
	TypeTinyBlob   byte = 0xf9 // MYSQL_TYPE_TINY_BLOB
	TypeMediumBlob byte = 0xfa // MYSQL_TYPE_MEDIUM_BLOB
	TypeLongBlob   byte = 0xfb // MYSQL_TYPE_LONG_BLOB
	TypeBlob       byte = 0xfc // MYSQL_TYPE_BLOB
	TypeVarString  byte = 0xfd // MYSQL_TYPE_VAR_STRING
	TypeString     byte = 0xfe // MYSQL_TYPE_STRING
	TypeGeometry   byte = 0xff // MYSQL_TYPE_GEOMETRY
)

// Column definition flags.
const (
	FlagNotNull       uint16 = 1     // NOT_NULL_FLAG
	FlagPriKey        uint16 = 2     // PRI_KEY_FLAG
	FlagUniqueKey     uint16 = 4     // UNIQUE_KEY_FLAG
	FlagMultipleKey   uint16 = 8     // MULTIPLE_KEY_FLAG
	FlagBlob          uint16 = 16    // BLOB_FLAG
	FlagUnsigned      uint16 = 32    // UNSIGNED_FLAG
	FlagZerofill      uint16 = 64    // ZEROFILL_FLAG
	FlagBinary        uint16 = 128   // BINARY_FLAG
	FlagEnum          uint16 = 256   // ENUM_FLAG
	FlagAutoIncrement uint16 = 512   // AUTO_INCREMENT_FLAG
	FlagTimestamp     uint16 = 1024  // TIMESTAMP_FLAG
	FlagSet           uint16 = 2048  // SET_FLAG
	FlagNoDefault     uint16 = 4096  // NO_DEFAULT_VALUE_FLAG
	FlagOnUpdateNow   uint16 = 8192  // ON_UPDATE_NOW_FLAG
	FlagNum           uint16 = 32768 // NUM_FLAG
)

// Protocol limits.
const (
	// MaxPacketPayload is the largest payload of one physical packet; a
	// payload of exactly this size is continued by the next packet.
	MaxPacketPayload = 1<<24 - 1
	// ProtocolVersion is the handshake protocol version (Handshake v10).
	ProtocolVersion byte = 10
	// CursorTypeReadOnly is the COM_STMT_EXECUTE flag that opens a cursor.
	CursorTypeReadOnly byte = 0x01
)

// Authentication plugin names.
const (
	AuthNativePassword      = "mysql_native_password"
	AuthCachingSha2Password = "caching_sha2_password"
	AuthOldPassword         = "mysql_old_password" // pre-4.1 hashes, secure_auth off
	AuthClearPassword       = "mysql_clear_password"
	AuthSha256Password      = "sha256_password"
)
