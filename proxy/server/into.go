package server

import (
	"encoding/hex"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// intoRunner runs, for its handler, SELECT ... INTO @variables whose rows
// come from several shards (run). The handler holds it as into.
type intoRunner struct {
	h *handler
}

// run runs SELECT ... INTO @variables whose rows come from several
// targets (a Concat plan whose Into holds the clause): the proxy computes
// the statement's result over them as it would answer it (Capture), then
// has MariaDB assign the one row on the first target's node, as the
// statement SELECT <the row's values as literals> INTO @variables. The
// server's own answer reaches the client (its OK, its 1222 for a column
// count that does not match, its 1329 warning for no row), and the
// session reads the variables back from that connection and carries them
// as after any SELECT ... INTO. It returns the plan that ran last, for the
// statement's After.
func (r *intoRunner) run(plan *router.Plan, stmt *router.Stmt) (*router.Plan, backend.Outcome, error) {
	h := r.h
	var res backend.Outcome
	node := plan.Targets[0].Node
	// The targets assign nothing: their connections are not held for a
	// read-back, and a failure leaves the session's variables as they were
	// (the plan returned names one node, where nothing is held either).
	unassigned := &router.Plan{Kind: router.Forward, Targets: []router.Target{{Node: node}}, Tables: plan.Tables}
	h.settings.apply(h.x, h.c.st)
	was := h.c.st.HoldForReadBack(false)
	got, err := h.x.Capture(plan)
	h.c.st.HoldForReadBack(was)
	if err != nil {
		return unassigned, res, h.settle(err)
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, col := range got.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		if got.First == nil {
			b.WriteString("NULL")
			continue
		}
		b.WriteString(assignedLiteral(col, got.First[i]))
	}
	// As many rows as the statement had, up to two: none leaves the
	// variables and warns (1329); two assign the first row and fail on the
	// second (1172), as MariaDB does over its own rows. Where the client
	// put INTO: after the rest of the statement MariaDB warns (1287) that
	// the form is deprecated, and so it does here.
	from := ""
	switch {
	case got.Rows == 0:
		from = " FROM DUAL WHERE 0"
	case got.Rows > 1:
		from = " FROM (SELECT 1 UNION ALL SELECT 2) AS `rows`"
	case plan.IntoAtEnd:
		from = " FROM DUAL"
	}
	if plan.IntoAtEnd {
		b.WriteString(from + " " + plan.Into)
	} else {
		b.WriteString(" " + plan.Into + from)
	}
	sql := b.String()
	assign := &router.Plan{Kind: router.Forward, Targets: []router.Target{{Node: node, SQL: sql}}}
	return h.fence.forward(h, assign, stmt, sql, h.queryPacket(sql))
}

// binaryCollation is the id of the binary character set's collation.
const binaryCollation = 63

// assignedLiteral renders a value of a result column as the literal that
// gives a user variable what assigning it from that column would: numbers
// of their type, temporal values as temporal literals (stored as the
// server stores them from a column), strings in hexadecimal with their
// character set and collation, binary strings as binary strings.
func assignedLiteral(c *mysql.Column, v []byte) string {
	if v == nil {
		return "NULL"
	}
	switch c.Type {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeLong, mysql.TypeLongLong, mysql.TypeInt24, mysql.TypeYear:
		return string(v)
	case mysql.TypeDecimal, mysql.TypeNewDecimal:
		if !strings.Contains(string(v), ".") {
			return string(v) + "." // a DECIMAL without fraction ("12" would be an integer)
		}
		return string(v)
	case mysql.TypeFloat, mysql.TypeDouble:
		// An exponent keeps the value a DOUBLE ("1" would be an integer).
		if strings.ContainsAny(string(v), "eE") {
			return string(v)
		}
		return string(v) + "E0"
	case mysql.TypeDate:
		return "DATE'" + string(v) + "'"
	case mysql.TypeTime:
		return "TIME'" + string(v) + "'"
	case mysql.TypeDatetime, mysql.TypeTimestamp:
		return "TIMESTAMP'" + string(v) + "'"
	}
	x := "X'" + hex.EncodeToString(v) + "'"
	coll, ok := mysql.CollationByID(byte(c.Charset))
	if c.Charset == binaryCollation || c.Charset > 255 || !ok || coll.Charset == "" {
		return "_binary " + x
	}
	if coll.Name == "" {
		return "_" + coll.Charset + " " + x
	}
	return "_" + coll.Charset + " " + x + " COLLATE " + coll.Name
}
