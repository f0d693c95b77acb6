package router

import "testing"

// TestParseTxn: the statement sent to the backends is composed from what
// was recognised, never the client's text; anything more in the text makes
// it a statement the proxy does not run itself.
func TestParseTxn(t *testing.T) {
	tests := []struct {
		sql  string
		want Txn
	}{
		{"BEGIN", Txn{Verb: TxnBegin, SQL: "START TRANSACTION"}},
		{"begin work;", Txn{Verb: TxnBegin, SQL: "START TRANSACTION"}},
		{"/* trace */ START TRANSACTION", Txn{Verb: TxnBegin, SQL: "START TRANSACTION"}},
		{"start transaction read only", Txn{Verb: TxnBegin, SQL: "START TRANSACTION READ ONLY", ReadOnly: true}},
		{"START TRANSACTION WITH CONSISTENT SNAPSHOT,READ WRITE", Txn{Verb: TxnBegin, SQL: "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ WRITE", Snapshot: true, ReadWrite: true}},
		{"COMMIT", Txn{Verb: TxnCommit, SQL: "COMMIT"}},
		{"rollback work", Txn{Verb: TxnRollback, SQL: "ROLLBACK"}},
		{"SAVEPOINT Sp1", Txn{Verb: TxnSavepoint, Name: "sp1", SQL: "SAVEPOINT `Sp1`"}},
		{"SAVEPOINT `a``b`", Txn{Verb: TxnSavepoint, Name: "a`b", SQL: "SAVEPOINT `a``b`"}},
		{"ROLLBACK TO sp1", Txn{Verb: TxnRollbackTo, Name: "sp1", SQL: "ROLLBACK TO SAVEPOINT `sp1`"}},
		{"ROLLBACK WORK TO SAVEPOINT sp1", Txn{Verb: TxnRollbackTo, Name: "sp1", SQL: "ROLLBACK TO SAVEPOINT `sp1`"}},
		{"RELEASE SAVEPOINT sp1", Txn{Verb: TxnRelease, Name: "sp1", SQL: "RELEASE SAVEPOINT `sp1`"}},
		// More in the text: not the proxy's.
		{"START TRANSACTION ; SET SESSION sql_select_limit=1", Txn{}},
		{"START TRANSACTION; SET @x = 1", Txn{}},
		{"BEGIN /*M!, SESSION sql_select_limit=1 */", Txn{}},
		{"START TRANSACTION /*!99999 , READ ONLY */", Txn{}},
		{"SAVEPOINT a;SET @x=1", Txn{}},
		{"SAVEPOINT `a`;SET @x=1", Txn{}},
		{"SAVEPOINT a -- x", Txn{}},
		{"SAVEPOINT a # x", Txn{}},
		{"SAVEPOINT `a` `b`", Txn{}},
		{"SAVEPOINT `a`b`", Txn{}},
		{"COMMIT AND CHAIN", Txn{Verb: TxnCommit, SQL: "COMMIT", Chain: true}},
		{"START TRANSACTION READ ONLY, READ WRITE", Txn{}},
		{"START TRANSACTION READ WRITE, READ WRITE", Txn{}},
		{"commit work and no chain no release", Txn{Verb: TxnCommit, SQL: "COMMIT", NoChain: true, NoRelease: true}},
		{"COMMIT AND CHAIN RELEASE", Txn{}},
		{"ROLLBACK RELEASE", Txn{Verb: TxnRollback, SQL: "ROLLBACK", Release: true}},
		{"START TRANSACTION READ", Txn{}},
		{"START TRANSACTION READ ONLY,", Txn{}},
		{"START SLAVE", Txn{}},
	}
	for _, tt := range tests {
		if got := ParseTxn(tt.sql); got != tt.want {
			t.Errorf("ParseTxn(%q) = %+v, want %+v", tt.sql, got, tt.want)
		}
	}
}
