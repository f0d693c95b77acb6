package changestream

import (
	"encoding/binary"
)

// A DDL change (Options.DDL) is one statement the binary log carries as a
// query event of its own (a standalone or DDL-flagged GTID group) that
// changes a streamed table: CREATE TABLE, ALTER TABLE (and CREATE INDEX,
// DROP INDEX), DROP TABLE, TRUNCATE TABLE and RENAME TABLE of one of its
// subtables. Which tables a statement changes is read from the statement
// parsed as the server read it (the sql_mode flags that change how text
// reads come with the event) by the router (router.ChangedTables), never from its text: a table named in a
// comment or a string is not a table the statement changes. A statement
// the parser refuses is passed on with no Table, whatever it names: the
// reader does not guess.

// sqlMode reads the sql_mode a query event was logged under from its
// status variables: MariaDB writes Q_FLAGS2_CODE (0, 4 bytes) and then
// Q_SQL_MODE_CODE (1, 8 bytes) first; anything else means no mode here (0).
func sqlMode(vars []byte) uint64 {
	for len(vars) > 0 {
		switch vars[0] {
		case 0: // Q_FLAGS2_CODE
			if len(vars) < 5 {
				return 0
			}
			vars = vars[5:]
		case 1: // Q_SQL_MODE_CODE
			if len(vars) < 9 {
				return 0
			}
			return binary.LittleEndian.Uint64(vars[1:])
		default:
			return 0
		}
	}
	return 0
}
