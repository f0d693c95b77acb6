package server

import (
	"github.com/shardgate/shardgate/proxy/engine"
	"github.com/shardgate/shardgate/proxy/session"
)

// execKnobs gives the executor the session settings that shape the answers
// the proxy computes itself (div_precision_increment for AVG and divisions
// in merges), before it runs a plan. The handler holds it as knobs.
type execKnobs struct {
	// divPrec holds the session's div_precision_increment for the
	// executor, which points at it.
	divPrec int
}

// apply sets x's knobs from the session st.
func (k *execKnobs) apply(x *engine.Executor, st *session.State) {
	x.DivPrecision = nil
	if n, ok := st.DivPrecision(); ok {
		k.divPrec = n
		x.DivPrecision = &k.divPrec
	}
}
