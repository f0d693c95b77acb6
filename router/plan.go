package router

import "slices"

// Plan is what a statement executes as: plain data that the session reads
// and runs. A plan never executes itself and is never modified after Route
// returns it (plans may be shared between sessions).
type Plan struct {
	Kind    PlanKind
	Targets []Target
	// Renames lists physical table names to replace with logical ones in
	// text results (SHOW CREATE TABLE, SHOW INDEX on a sharded table).
	Renames []Rename
	// Tables names the logical sharded tables the statement touches, for
	// error messages and EXPLAIN.
	Tables []string
	// Copies marks a SumOK plan whose targets hold copies of the same rows
	// (a write to a global table on each of its nodes): the client gets one
	// target's affected rows, not the sum. All targets run the same SQL.
	Copies bool
	// IDTarget is the target whose insert id is the statement's
	// LAST_INSERT_ID() in a SumOK plan: the one that inserts the
	// statement's first row, as MySQL reports the id generated for it.
	IDTarget int
	// Generated is how many values of a global sequence the plan's SQL
	// carries (an INSERT that left its sequence column out, or gave NULL,
	// DEFAULT or 0); FirstID is the first of them, the statement's
	// LAST_INSERT_ID(). Such a plan is a SumOK plan, never cached.
	Generated int
	FirstID   uint64
	// Advance, when set, asks the caller to move a table's sequence past
	// an explicit value the statement stores (sequence_advance), once the
	// statement succeeded.
	Advance *Advance
	// Gathers are the tables a Fallback plan copies.
	Gathers []Gather
	// Pattern and Escape are a ShowTableStatus plan's LIKE pattern.
	Pattern string
	Escape  byte
	// Load says how a LoadSplit plan cuts the client's file.
	Load *Load
	// Sticky marks a plan whose statements leave state on every target's
	// connection (LOCK TABLES): the session keeps those connections.
	Sticky bool
	// Merge says how a Concat plan's rows combine when plain concatenation
	// is not MySQL's answer (ORDER BY, LIMIT, GROUP BY, aggregates,
	// DISTINCT); nil means concatenate.
	Merge *Merge
	// Into is the INTO @variables clause of a SELECT planned as a Concat
	// or an exact fallback over several targets, cut out of the targets' SQL: the caller
	// computes the statement's one row from their rows and assigns it
	// (MariaDB's 1172 for more than one row). IntoAtEnd: the client wrote
	// it after the rest of the statement (a form MariaDB warns about).
	Into      string
	IntoAtEnd bool
	// Cache is, in an Explain plan, whether the result cache may keep the
	// statement's answer and why not (cacheVerdict); CacheTable the
	// logical db.table it would be kept for ("" when not cacheable).
	Cache, CacheTable string
}

// PlanKind says how a plan's targets are run and their results combined.
type PlanKind uint8

// Plan kinds.
const (
	// Forward runs one target and relays its response unchanged.
	Forward PlanKind = iota
	// Concat runs a SELECT on several targets and returns one result
	// set: the first target's column definitions, then every target's rows
	// in target order. Only planned where MySQL's answer would be that
	// concatenation (no ORDER BY, GROUP BY, LIMIT, DISTINCT, aggregates).
	Concat
	// SumOK runs DML on several targets and answers one OK packet:
	// affected rows and warnings summed, the first non-zero insert id.
	SumOK
	// Fanout runs DDL (or TRUNCATE, CREATE/DROP DATABASE) on every
	// target; all must succeed. Failures are reported per target in one
	// error; successes are not rolled back (re-running with IF [NOT]
	// EXISTS converges).
	Fanout
	// ShowTables runs SHOW [FULL] TABLES on the targets and answers
	// with the union of table names, physical subtable names replaced by
	// their logical table, without duplicates, in name order.
	ShowTables
	// ShowTableStatus runs SHOW TABLE STATUS on the targets and answers
	// one row per logical table (subtables summed, Renames), matching
	// Pattern.
	ShowTableStatus
	// Fallback copies the rows of the Gathers' tables into temporary
	// tables on one connection to the default node, runs the one target's
	// SQL there (the statement with those tables' names replaced) and
	// streams its result (see planFallback).
	Fallback
	// LoadSplit runs LOAD DATA LOCAL INFILE on every target (one per
	// subtable, in subtable order), each with the lines of the client's
	// file that Load sends there (all of them for a global table, Copies).
	LoadSplit
	// Explain answers EXPLAIN FORMAT='shard' with one row per target
	// (node, backend address, subtable, physical SQL) without running it.
	Explain
)

// Target is one backend execution of a plan.
type Target struct {
	Node string // node name from ks.yaml
	// Subtable is the physical table the target reads or writes ("" when
	// the statement touches no sharded table).
	Subtable string
	// SQL is the physical statement; "" means the client's statement is
	// sent unchanged (so the raw packet can be forwarded).
	SQL string
}

// Rename maps a physical table name to its logical name.
type Rename struct {
	Physical, Logical string
}

// On returns a copy of a plan on one target that runs it on node instead
// (its statement unchanged).
func (p *Plan) On(node string) *Plan {
	q := *p
	q.Targets = []Target{{Node: node, SQL: p.Targets[0].SQL}}
	return &q
}

// Nodes returns the nodes of the plan's targets, each once, in target
// order.
func (p *Plan) Nodes() []string {
	var out []string
	for _, t := range p.Targets {
		if !slices.Contains(out, t.Node) {
			out = append(out, t.Node)
		}
	}
	return out
}

// Advance names a sequence (by its logical table) and the value it must
// move past.
type Advance struct {
	DB, Table string
	Past      uint64
}
