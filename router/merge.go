package router

// Merge describes how the proxy combines the rows that several targets
// return for one SELECT into exactly the answer one MySQL server holding all
// rows would give. Column indexes refer to the targets' rows, which all have
// the same columns: first the columns the client sees, then Hidden helper
// columns (sort keys not in the select list, AVG's COUNT, HAVING's
// aggregates) that the proxy strips. A negative index counts from the end
// of the row (-1 is the last column).
type Merge struct {
	// Hidden is the number of trailing columns the client does not see.
	Hidden int
	// GroupBy lists the grouping key columns; rows with equal keys are
	// combined with Aggs. Grouped with an empty GroupBy means one group
	// over all rows (aggregates without GROUP BY).
	Grouped bool
	GroupBy []int
	// Aggs says how each aggregate column combines the targets' partial
	// results. Columns of a grouped query that are neither keys nor
	// aggregates take the value of the group's first row, as MySQL does.
	Aggs []Agg
	// Having is evaluated on each merged group; groups for which it is not
	// true are dropped. It was removed from the targets' SQL.
	Having *Expr
	// Distinct removes duplicate rows over the visible columns.
	Distinct bool
	// OrderBy sorts the merged rows. Without grouping the targets return
	// their rows already sorted the same way, so the proxy merges streams.
	OrderBy []SortKey
	// Limit applies after sorting: skip Offset rows, return at most Count.
	// Targets were sent LIMIT Offset+Count.
	HasLimit      bool
	Offset, Count uint64
}

// SortKey is one ORDER BY key.
type SortKey struct {
	Col  int
	Desc bool
}

// AggFunc is an aggregate function the proxy can finish.
type AggFunc uint8

// Aggregate functions.
const (
	AggCount AggFunc = iota + 1 // sum of the targets' counts
	AggSum                      // exact sum of the targets' sums; NULL when all are NULL
	AggMin
	AggMax
	AggAvg // Col holds the targets' SUM, CountCol their COUNT: SUM/COUNT with 4 more decimals
)

// Agg is one aggregate column.
type Agg struct {
	Col      int
	Func     AggFunc
	CountCol int // AggAvg: the hidden COUNT column
}

// ExprOp is an operator of a HAVING expression.
type ExprOp uint8

// Expression operators.
const (
	OpCol   ExprOp = iota + 1 // column value: Col
	OpConst                   // numeric literal or NULL: Value (nil = NULL)
	OpEQ
	OpNE
	OpLT
	OpLE
	OpGT
	OpGE
	OpNullEQ // <=>
	OpAnd
	OpOr
	OpNot
	OpIsNull
	OpIsNotNull
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpString  // string literal: Value; compared as text unless the other side is a number
	OpBetween // Args[0] BETWEEN Args[1] AND Args[2], all three compared under one type
)

// Expr is a small expression tree over a merged row's columns, evaluated
// with MySQL's three-valued logic.
type Expr struct {
	Op    ExprOp
	Col   int
	Value []byte
	Args  []*Expr
}
