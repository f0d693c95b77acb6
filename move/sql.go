package move

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"

	"github.com/shardgate/shardgate/changestream"
	"github.com/shardgate/shardgate/mysql"
)

// Endpoint is a server the workflow reads or writes.
type Endpoint struct {
	Addr     string `json:"addr"`
	User     string `json:"user"`
	Password string `json:"password,omitempty"`
}

// dial opens a connection for copying rows: results come as the bytes the
// columns store (character_set_results NULL), values go back as _binary
// literals, TIMESTAMPs read and written in UTC, without strict mode (a
// stored value is copied as it is).
func dial(ep Endpoint) (*client.Conn, error) { return dialWith(ep, nil) }

// dialWith is dial with opt applied to the connection before its
// handshake (nil: none).
func dialWith(ep Endpoint, opt func(*client.Conn)) (*client.Conn, error) {
	c, err := client.ConnectWithTimeout(ep.Addr, ep.User, ep.Password, "", 5*time.Second, func(c *client.Conn) error {
		// A server that stopped answering fails the step (it is retried)
		// instead of hanging it.
		c.ReadTimeout, c.WriteTimeout = time.Minute, time.Minute
		if opt != nil {
			opt(c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep.Addr, err)
	}
	if _, err := c.Execute("SET NAMES utf8mb4, character_set_results = NULL, time_zone = '+00:00', sql_mode = 'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION'"); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", ep.Addr, err)
	}
	// The workflow's writes are flagged so that change streams leave
	// them out (changestream.Options.KeepFlagged): they are copies of rows,
	// not changes of the logical table. A server that refuses the flag (a
	// MySQL server has no such variable) still gets the writes, unflagged;
	// the run warns once (flagging).
	if err := flag(c); err != nil && !isServerError(err) {
		c.Close()
		return nil, fmt.Errorf("%s: %w", ep.Addr, err)
	}
	return c, nil
}

// flagging warns, once per run, for each node the workflow writes to that
// refuses skip_replication: there the copy's, the apply's and the reverse
// stream's writes reach change streams as changes of the table, and a
// consumer of the table's changes sees each copied row again.
func (r *run) flagging(log *zap.Logger) {
	_, _, targets, _, err := r.layout()
	if err != nil {
		return // the step reports it
	}
	if sp := r.spec(); sp.Kind == KindReshard {
		olds, err := placementTargets(sp.DB, sp.From)
		if err != nil {
			return
		}
		targets = append(targets, olds...) // the reverse stream's
	}
	seen := map[string]bool{}
	for _, t := range targets {
		if seen[t.node] {
			continue
		}
		seen[t.node] = true
		ep, err := r.m.env.Endpoint(t.node)
		if err != nil {
			continue
		}
		c, err := dial(ep)
		if err != nil {
			continue // the step reports it
		}
		if err := flag(c); err != nil {
			log.Warn("the node refuses skip_replication: the workflow's writes there are not flagged, and change streams "+
				"carry them as changes of the table (a consumer sees copied rows again)", zap.String("node", t.node), zap.Error(err))
		}
		c.Close()
	}
}

// flag sets MariaDB's skip_replication on c: its transactions' binary log
// events carry LOG_EVENT_SKIP_REPLICATION_F. Replicas apply them all the
// same (replicate_events_marked_for_skip=REPLICATE, the default); MariaDB
// lets any account set it.
func flag(c *client.Conn) error {
	_, err := c.Execute("SET skip_replication = 1")
	return err
}

// qualified quotes db.table.
func qualified(db, table string) string { return mysql.QuoteIdent(db) + "." + mysql.QuoteIdent(table) }

// quoteString writes s as a binary string literal: the bytes go into the
// column as they are, whatever its character set.
func quoteString(b *strings.Builder, s string) {
	b.WriteString(mysql.QuoteString(s, "binary"))
}

// text quotes s as a utf8mb4 string literal (names, JSON).
func text(s string) string { return mysql.QuoteString(s, "utf8mb4") }

// cell is a result value as the text protocol sends it; nil is NULL.
func cell(v *gmysql.FieldValue) []byte {
	switch v.Type {
	case gmysql.FieldValueTypeNull:
		return nil
	case gmysql.FieldValueTypeSigned:
		return strconv.AppendInt(nil, v.AsInt64(), 10)
	case gmysql.FieldValueTypeUnsigned:
		return strconv.AppendUint(nil, v.AsUint64(), 10)
	case gmysql.FieldValueTypeFloat:
		return strconv.AppendFloat(nil, v.AsFloat64(), 'g', -1, 64)
	}
	return append([]byte{}, v.AsString()...)
}

// literal writes a value read from a result (text protocol) as SQL.
func literal(b *strings.Builder, v *gmysql.FieldValue) {
	b.Write(appendLiteral(nil, v))
}

// appendLiteral appends a value read from a result (text protocol) as
// SQL: numbers as they are, strings as _binary literals, NULL.
func appendLiteral(dst []byte, v *gmysql.FieldValue) []byte {
	switch v.Type {
	case gmysql.FieldValueTypeNull:
		return append(dst, "NULL"...)
	case gmysql.FieldValueTypeSigned:
		return strconv.AppendInt(dst, v.AsInt64(), 10)
	case gmysql.FieldValueTypeUnsigned:
		return strconv.AppendUint(dst, v.AsUint64(), 10)
	case gmysql.FieldValueTypeFloat:
		f := v.AsFloat64()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return append(dst, "NULL"...)
		}
		return strconv.AppendFloat(dst, f, 'g', -1, 64)
	}
	return mysql.AppendQuoted(dst, string(v.AsString()), "binary")
}

func writeFloat(b *strings.Builder, f float64, bits int) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		b.WriteString("NULL")
		return
	}
	b.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
}

// anyLiteral writes a value decoded from the binary log as SQL (the
// applier's stream has Options.RawText: a string holds the stored bytes).
func anyLiteral(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("NULL")
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int32:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int16:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int8:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case uint32:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint16:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case uint8:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case float64:
		writeFloat(b, x, 64)
	case float32:
		writeFloat(b, float64(x), 32)
	case json.Number:
		b.WriteString(string(x))
	case changestream.Decimal:
		b.WriteString(string(x))
	case changestream.Enum:
		// The index: exact even for the empty error member.
		b.WriteString(strconv.FormatInt(x.Index, 10))
	case changestream.Set:
		b.WriteString(strconv.FormatUint(x.Bits, 10))
	case string:
		quoteString(b, x)
	case []byte:
		quoteString(b, string(x))
	default:
		quoteString(b, fmt.Sprint(x))
	}
}

// fieldAny turns a result value into the Go value the shard rule reads.
func fieldAny(v *gmysql.FieldValue) any {
	switch v.Type {
	case gmysql.FieldValueTypeNull:
		return nil
	case gmysql.FieldValueTypeSigned:
		return v.AsInt64()
	case gmysql.FieldValueTypeUnsigned:
		return v.AsUint64()
	case gmysql.FieldValueTypeFloat:
		return v.AsFloat64()
	}
	return string(v.AsString())
}

// gtidPos reads a server's binary log position.
func gtidPos(c *client.Conn) (string, error) {
	r, err := c.Execute("SELECT @@gtid_binlog_pos")
	if err != nil {
		return "", err
	}
	return r.GetString(0, 0)
}

// covers reports whether position have contains every GTID of want.
func covers(have, want string) bool {
	if want == "" {
		return true
	}
	h, err := gmysql.ParseMariadbGTIDSet(have)
	if err != nil {
		return false
	}
	w, err := gmysql.ParseMariadbGTIDSet(want)
	if err != nil {
		return false
	}
	return h.Contain(w)
}

// isServerError reports whether err is the server's answer (the
// connection is fine), not a failed connection.
func isServerError(err error) bool {
	var me *gmysql.MyError
	return errors.As(err, &me)
}
