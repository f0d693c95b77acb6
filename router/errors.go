package router

import (
	"fmt"

	"github.com/shardgate/shardgate/mysql"
)

// ErNoPartition is ER_NO_PARTITION_FOR_GIVEN_VALUE (1526, HY000): a shard
// key value outside every range of a range or date rule, the error MySQL
// gives for a row no partition accepts.
const ErNoPartition uint16 = 1526

// ErWrongValueCount is ER_WRONG_VALUE_COUNT_ON_ROW (1136, 21S01).
const ErWrongValueCount uint16 = 1136

func notSupported(format string, args ...any) error {
	return mysql.NewError(mysql.ErNotSupported, format, args...)
}

func outOfRange(r *rule, v value) error {
	return mysql.NewError(ErNoPartition, "Table has no partition for value %s: key %s of table %s is outside every range of its shard rule (%s)",
		v, r.key, r.table, r.span())
}

// span describes the keys a range or date rule covers.
func (r *rule) span() string {
	switch r.kind {
	case ruleRange:
		return fmt.Sprintf("%s in [0, %d)", r.key, r.limit*int64(len(r.subs)))
	case ruleYear, ruleMonth, ruleDay:
		return fmt.Sprintf("%s from %s to %s", r.key, r.subs[0].name, r.subs[len(r.subs)-1].name)
	}
	return r.key
}

// missingKey is the error of an INSERT into a sharded table whose column
// list leaves out the shard key: it says what to do, which depends on the
// rule (a sequence that fills the key would have filled it) and on the
// form (INSERT ... SELECT takes no sequence values).
func missingKey(r *rule, sel bool) error {
	const head = "INSERT into sharded table %s must set its shard key %s: shardgate picks the subtable from it; "
	switch {
	case sel:
		return notSupported(head+"name %s in the column list and select its value", r.table, r.key, r.key)
	case r.seq != "":
		return notSupported(head+"give %s a value in every row (the rule's sequence fills %s, not the shard key)", r.table, r.key, r.key, r.seq)
	default:
		return notSupported(head+"give %s a value in every row, or add `sequence: %s` to the rule of %s.%s in ks.yaml so that shardgate fills it from a global sequence, as AUTO_INCREMENT would",
			r.table, r.key, r.key, r.key, r.db, r.table)
	}
}
