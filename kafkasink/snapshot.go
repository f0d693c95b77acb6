package kafkasink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/changestream"
)

// systemDBs are never snapshotted (nor are they logical tables).
var systemDBs = []string{"mysql", "information_schema", "performance_schema", "sys"}

// snapshot writes every row of the node's subtables of the stream's
// tables as op "r" records, in one Kafka transaction with the node's
// position the rows are consistent with, and returns that position.
//
// The rows are read inside START TRANSACTION WITH CONSISTENT SNAPSHOT;
// binlog_snapshot_file and binlog_snapshot_position name the binary log
// position the snapshot is consistent with, and BINLOG_GTID_POS turns it
// into the GTID position streaming resumes from: a transaction is either
// in the snapshot or after that position, never both, never neither.
func (w *writer) snapshot(ctx context.Context, src changestream.Source) (string, error) {
	c := gomysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = src.User, src.Password, "tcp", src.Addr
	// Values as changestream writes them: TIMESTAMPs in UTC, text in UTF-8.
	c.Params = map[string]string{"time_zone": "'+00:00'", "charset": "utf8mb4"}
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return "", err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	var file, posText string
	rows, err := conn.QueryContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return "", err
	}
	for rows.Next() {
		var name, val string
		if err := rows.Scan(&name, &val); err != nil {
			rows.Close()
			return "", err
		}
		switch strings.ToLower(name) {
		case "binlog_snapshot_file":
			file = val
		case "binlog_snapshot_position":
			posText = val
		}
	}
	rows.Close()
	if file == "" {
		return "", errors.New("binlog_snapshot_file is empty: is the binary log on?")
	}
	var gtid sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", file, posText).Scan(&gtid); err != nil {
		return "", fmt.Errorf("BINLOG_GTID_POS(%s, %s): %w", file, posText, err)
	}
	if !gtid.Valid {
		return "", fmt.Errorf("BINLOG_GTID_POS(%s, %s) is NULL", file, posText)
	}
	tables, err := w.subtables(ctx, conn)
	if err != nil {
		return "", err
	}
	start := time.Now().Unix()
	// Each row is produced when the next is read, so the node's last one
	// goes out with source.snapshot "last", as Debezium marks the end.
	var held *changestream.Change
	next := func(ch *changestream.Change) error {
		if held != nil {
			if err := w.change(ctx, held, txOrder{}, "true"); err != nil {
				return err
			}
			w.s.snapshotRow()
		}
		held = ch
		return nil
	}
	for _, t := range tables {
		if err := w.snapshotTable(ctx, conn, src.Node, t, start, next); err != nil {
			return "", fmt.Errorf("reading %s.%s: %w", t.db, t.table, err)
		}
	}
	if held != nil {
		if err := w.change(ctx, held, txOrder{}, "last"); err != nil {
			return "", err
		}
		w.s.snapshotRow()
	}
	w.pos[src.Node] = gtid.String
	w.txns++
	if err := w.commit(ctx); err != nil {
		return "", err
	}
	return gtid.String, nil
}

// subtable is a physical table to snapshot and its logical name.
type subtable struct{ db, table, logical string }

// subtables lists the node's tables that belong to the stream.
func (w *writer) subtables(ctx context.Context, conn *sql.Conn) ([]subtable, error) {
	rows, err := conn.QueryContext(ctx, "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' ORDER BY 1, 2")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []subtable
	for rows.Next() {
		var t subtable
		if err := rows.Scan(&t.db, &t.table); err != nil {
			return nil, err
		}
		if slices.Contains(systemDBs, t.db) {
			continue
		}
		t.logical = w.s.names(t.db, t.table)
		if len(w.s.cfg.Tables) > 0 && !slices.Contains(w.s.cfg.Tables, t.logical) {
			continue
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// snapshotTable reads the rows of one subtable and hands each to next.
func (w *writer) snapshotTable(ctx context.Context, conn *sql.Conn, node string, t subtable, start int64, next func(*changestream.Change) error) error {
	key, err := primaryKey(ctx, conn, t.db, t.table)
	if err != nil {
		return err
	}
	details, err := columnDetails(ctx, conn, t.db, t.table)
	if err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, "SELECT * FROM "+quoteIdent(t.db)+"."+quoteIdent(t.table))
	if err != nil {
		var me *gomysql.MySQLError
		if errors.As(err, &me) && me.Number == 1412 {
			return nil // ER_TABLE_DEF_CHANGED: created after the snapshot; its rows stream
		}
		return err
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return err
	}
	types := make(map[string]string, len(cts))
	cols := make([]changestream.Column, len(cts))
	for i, ct := range cts {
		types[ct.Name()] = typeName(ct)
		ctype := details[ct.Name()]
		if strings.HasPrefix(ctype, "bit(") {
			types[ct.Name()] = ctype
		}
		nullable, _ := ct.Nullable()
		cols[i] = changestream.Column{Name: ct.Name(), Type: types[ct.Name()], Nullable: nullable}
		if strings.HasPrefix(ctype, "enum(") || strings.HasPrefix(ctype, "set(") {
			cols[i].Members = members(ctype)
		}
	}
	raw := make([]sql.RawBytes, len(cts))
	dest := make([]any, len(cts))
	for i := range raw {
		dest[i] = &raw[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		row := make(map[string]any, len(cts))
		for i, ct := range cts {
			row[ct.Name()] = value(types[ct.Name()], raw[i])
		}
		ch := changestream.Change{Node: node, Table: t.logical, Subtable: t.db + "." + t.table, Op: OpRead, After: row,
			Types: types, Columns: cols, Key: key, Seq: n, Time: start}
		n++
		if err := next(&ch); err != nil {
			return err
		}
	}
	return rows.Err()
}

// primaryKey lists the primary-key columns of db.table in the key's order.
func primaryKey(ctx context.Context, conn *sql.Conn, db, table string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, "SELECT column_name FROM information_schema.key_column_usage "+
		"WHERE table_schema = ? AND table_name = ? AND constraint_name = 'PRIMARY' ORDER BY ordinal_position", db, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var key []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		key = append(key, c)
	}
	return key, rows.Err()
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// typeName names a result column's type as Change.Types does ("int
// unsigned", "decimal(10,2)", "varbinary", "datetime(6)").
func typeName(ct *sql.ColumnType) string {
	t := strings.ToLower(ct.DatabaseTypeName())
	if rest, ok := strings.CutPrefix(t, "unsigned "); ok {
		t = rest + " unsigned"
	}
	switch t {
	case "decimal":
		if p, s, ok := ct.DecimalSize(); ok {
			t = fmt.Sprintf("decimal(%d,%d)", p, s)
		}
	case "time", "datetime", "timestamp":
		// The fraction digits, as the binary log's table map has them.
		if _, s, ok := ct.DecimalSize(); ok && s > 0 && s <= 6 {
			t = fmt.Sprintf("%s(%d)", t, s)
		}
	}
	return t
}

// columnDetails reads what a result set does not say about the columns
// of db.table and the binary log's table map does: a BIT's width and the
// members of an ENUM or a SET, as column_type by column name. It runs
// before the table's SELECT, which holds the connection until read.
func columnDetails(ctx context.Context, conn *sql.Conn, db, table string) (map[string]string, error) {
	rows, err := conn.QueryContext(ctx, "SELECT column_name, column_type FROM information_schema.columns "+
		"WHERE table_schema = ? AND table_name = ? AND data_type IN ('bit', 'enum', 'set')", db, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, ctype string
		if err := rows.Scan(&name, &ctype); err != nil {
			return nil, err
		}
		out[name] = ctype
	}
	return out, rows.Err()
}

// members parses the members of a column_type such as enum('a','b'), a
// quote doubled or backslash-escaped inside a member.
func members(ctype string) []string {
	_, list, _ := strings.Cut(ctype, "(")
	list = strings.TrimSuffix(list, ")")
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(list); i++ {
		c := list[i]
		switch {
		case !in && c == '\'':
			in = true
		case in && c == '\'' && i+1 < len(list) && list[i+1] == '\'':
			cur.WriteByte('\'')
			i++
		case in && c == '\'':
			in = false
			out = append(out, cur.String())
			cur.Reset()
		case in && c == '\\' && i+1 < len(list):
			i++
			cur.WriteByte(list[i])
		case in:
			cur.WriteByte(c)
		}
	}
	return out
}

// value converts a column's text-protocol bytes to the Go value
// changestream gives the same column (values.go), so snapshot rows and
// streamed rows encode alike.
func value(typ string, b sql.RawBytes) any {
	if b == nil {
		return nil
	}
	base, unsigned := strings.CutSuffix(typ, " unsigned")
	base, _, _ = strings.Cut(base, "(")
	s := string(b)
	switch base {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
		if unsigned {
			if v, err := strconv.ParseUint(s, 10, 64); err == nil {
				return v
			}
		} else if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v
		}
	case "bit":
		var v uint64
		for _, c := range b {
			v = v<<8 | uint64(c)
		}
		return v
	case "float":
		if v, err := strconv.ParseFloat(s, 32); err == nil {
			return float32(v)
		}
	case "double":
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return v
		}
	case "decimal":
		return changestream.Decimal(s)
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry":
		return append([]byte(nil), b...)
	}
	return s
}
