package server

import (
	"bytes"
	"errors"
	"net"
	"time"

	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
	"github.com/shardgate/shardgate/router"
)

// COM_STMT_BULK_EXECUTE (MariaDB's array binding: Connector/J's
// useBulkStmts, Connector/C's STMT_ATTR_ARRAY_SIZE) on the proxy's
// statements.
//
// Each parameter row runs as one COM_STMT_EXECUTE of the statement would,
// routed by its own values (a row of a sharded table goes to its shard, a
// row of an unsharded one to the default node), one after the other; the
// client gets one OK with
// the rows' affected rows and warnings added up and the first row's
// insert id, or the ERR of the first row that failed, with none of the
// rows done (atomic: one statement, as on MariaDB). As on MariaDB, only
// INSERT, REPLACE, UPDATE and DELETE take it (else 1295), and the DEFAULT
// and IGNORE indicators, which no single execution can express, are
// refused (1235) before any row runs.

// erUnsupportedPS is ER_UNSUPPORTED_PS.
const erUnsupportedPS = 1295

// bulkKeywords are the statements MariaDB executes in bulk
// (CF_PS_ARRAY_BINDING_SAFE).
var bulkKeywords = map[string]bool{"INSERT": true, "REPLACE": true, "UPDATE": true, "DELETE": true}

// bulkRunner runs COM_STMT_BULK_EXECUTE for the session's stmtHandler.
type bulkRunner struct{ s *stmtHandler }

// run answers COM_STMT_BULK_EXECUTE.
func (b bulkRunner) run(p []byte) error {
	s := b.s
	c := s.h.c
	id, _ := mysql.StmtBulkExecuteID(p)
	ps := c.st.Stmts.Get(s.stmtID(id))
	if ps == nil {
		return mysql.NewError(mysql.ErUnknownStmtHandler, "Unknown prepared statement handler (%d) given to mysqld_stmt_bulk_execute", id)
	}
	s.classify(ps)
	if ps.Local || ps.Conn != nil || ps.NParams == 0 || ps.Class.Kind != router.KindWrite || !bulkKeywords[ps.Class.Keyword] {
		return mysql.NewError(erUnsupportedPS, "This command is not supported in the prepared statement protocol yet")
	}
	bk, err := mysql.ParseStmtBulkExecute(p, ps.NParams, ps.Types)
	if err != nil {
		return err
	}
	if bk.Special {
		return mysql.NewError(mysql.ErNotSupported, "the DEFAULT and IGNORE indicators of COM_STMT_BULK_EXECUTE are not supported by shardgate; bind the values")
	}
	if bk.Flags&mysql.BulkSendUnitResults != 0 {
		return mysql.NewError(mysql.ErNotSupported, "results per row of COM_STMT_BULK_EXECUTE (STMT_BULK_FLAG_SEND_UNIT_RESULTS) are not supported by shardgate")
	}
	b.s.clearLong(ps)
	total, err := b.atomic(ps, bk.Rows)
	if err != nil {
		return err
	}
	total.Status = c.st.Status
	return c.writeOK(total)
}

// bulkSavepoint is the savepoint a bulk execution inside a transaction
// rolls back to when a row fails.
const bulkSavepoint = "shardgate_bulk"

// atomic runs the rows as one statement, as MariaDB does: all or
// none. Outside a transaction they run in one of their own (committed at
// the end, rolled back when a row fails); inside one, a failing row rolls
// the transaction back to where the bulk began (a savepoint), which stays
// open.
func (b bulkRunner) atomic(ps *session.Stmt, rows []mysql.StmtExecute) (mysql.OK, error) {
	h, st := b.s.h, b.s.h.c.st
	own := !st.InTxn()
	var err error
	if own {
		err = st.Begin(router.Txn{Verb: router.TxnBegin, SQL: "START TRANSACTION"})
	} else {
		err = st.Savepoint(router.TxnSavepoint, bulkSavepoint, "SAVEPOINT "+bulkSavepoint)
	}
	if err != nil {
		return mysql.OK{}, h.settle(err)
	}
	total, err := b.rows(ps, rows)
	var end error
	switch {
	case own:
		end = st.End(err == nil)
	case err != nil:
		end = st.Savepoint(router.TxnRollbackTo, bulkSavepoint, "ROLLBACK TO SAVEPOINT "+bulkSavepoint)
	default:
		end = st.Savepoint(router.TxnRelease, bulkSavepoint, "RELEASE SAVEPOINT "+bulkSavepoint)
	}
	if err == nil && end != nil {
		err = h.settle(end)
	}
	return total, err
}

// rows runs each row as an execution whose answer goes to a capture
// instead of the client, and adds up the OKs.
func (b bulkRunner) rows(ps *session.Stmt, rows []mysql.StmtExecute) (mysql.OK, error) {
	s, c := b.s, b.s.h.c
	var total mysql.OK
	client := c.c
	capture := &captureConn{}
	c.c = mysql.NewConn(capture, 512, 4096)
	defer func() { c.c = client }()
	var pkt []byte
	for i := range rows {
		pkt = mysql.AppendStmtExecute(pkt[:0], ps.ID, &rows[i])
		err := s.execute(ps, pkt)
		c.c.Flush()
		first := capture.first()
		capture.Reset()
		switch {
		case (err == nil || errors.Is(err, engine.ErrAnswered)) && len(first) > 0 && first[0] == mysql.ErrHeader:
			// The server's error, relayed.
			return total, mysql.ParseErr(first)
		case err != nil:
			return total, err
		case len(first) == 0 || first[0] != mysql.OKHeader:
			// A result set: not a statement MariaDB runs in bulk.
			return total, mysql.NewError(erUnsupportedPS, "This command is not supported in the prepared statement protocol yet")
		}
		ok, err := mysql.ParseOK(first)
		if err != nil {
			return total, err
		}
		total.AffectedRows += ok.AffectedRows
		total.Warnings += ok.Warnings
		if total.LastInsertID == 0 {
			total.LastInsertID = ok.LastInsertID
		}
	}
	if total.LastInsertID != 0 {
		c.st.LastInsertID = total.LastInsertID
	}
	return total, nil
}

// captureConn is the client side a bulk row's execution writes to: it
// keeps what is written, reads nothing.
type captureConn struct{ bytes.Buffer }

// first returns the payload of the first packet written (nil if none).
func (w *captureConn) first() []byte {
	b := w.Bytes()
	if len(b) < 4 {
		return nil
	}
	n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	if len(b) < 4+n {
		return nil
	}
	return b[4 : 4+n]
}

func (w *captureConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (w *captureConn) Close() error                     { return nil }
func (w *captureConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (w *captureConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (w *captureConn) SetDeadline(time.Time) error      { return nil }
func (w *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (w *captureConn) SetWriteDeadline(time.Time) error { return nil }
