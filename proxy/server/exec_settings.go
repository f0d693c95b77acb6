package server

import (
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
)

// execSettings gives the executor the session settings that shape the answers
// the proxy computes itself (div_precision_increment for AVG and divisions
// in merges), before it runs a plan. The handler holds it as settings.
type execSettings struct {
	// divPrec holds the session's div_precision_increment for the
	// executor, which points at it.
	divPrec int
}

// apply gives x the settings of the session st.
func (es *execSettings) apply(x *engine.Executor, st *session.State) {
	x.DivPrecision = nil
	if n, ok := st.DivPrecision(); ok {
		es.divPrec = n
		x.DivPrecision = &es.divPrec
	}
}
