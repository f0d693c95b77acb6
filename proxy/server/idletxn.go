package server

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/mysql"
)

// endIdleTxn ends the session of a client that stayed idle inside a
// transaction for idle_in_transaction_timeout (readCommand's wait ran
// out). The transaction is rolled back and the backend connections go
// back to their pools now, whatever the client does next: that is what
// frees the pool for other clients. The client then learns why its
// connection ends: its next command is answered with 1927
// (ER_CONNECTION_KILLED, SQLSTATE 70100) and the connection closes.
//
// MariaDB's own idle_transaction_timeout closes the socket without a
// word, and an ERR packet sent at once, before the client asks anything,
// reaches it out of sequence: libmariadb, Connector/J and go-sql-driver
// show it, PHP's mysqlnd reports "packets out of order" and 2006
// instead. An answer to the next command is read by every client. Until
// that command the session is an idle one outside a transaction, holding
// no backend connection: its wait_timeout (when it set one) bounds the
// wait, a shutdown ends it, and a COM_QUIT just closes it.
func (c *conn) endIdleTxn() {
	timeout := c.srv.cfg().IdleInTransactionTimeout
	c.srv.idleTxnClosed.Add(1)
	c.log.Info("rolled back a transaction idle for idle_in_transaction_timeout; the client's next command gets 1927 and the connection closes",
		zap.Duration("idle_in_transaction_timeout", timeout))
	c.st.ReleaseAll()
	if len(c.gates) > 0 {
		c.leaveGates()
	}
	c.inTxn.Store(false) // a shutdown may close the socket now
	c.idle.Store(true)
	c.c.ResetSeq()
	c.c.ReadTimeout = c.st.WaitTimeout
	p, err := c.c.ReadPacket()
	c.c.ReadTimeout = 0
	if err != nil || len(p) > 0 && p[0] == mysql.ComQuit {
		return
	}
	c.writeErr(mysql.NewError(mysql.ErConnectionKilled,
		"Connection was killed: idle in a transaction for longer than idle_in_transaction_timeout (%v); the transaction was rolled back", fmtDuration(timeout)))
}

// fmtDuration writes d as the configuration does ("5m0s" as "5m").
func fmtDuration(d time.Duration) string {
	if d%time.Minute == 0 && d >= time.Minute {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
