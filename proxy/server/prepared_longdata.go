package server

import (
	"encoding/binary"

	"github.com/shardgate/shardgate/proxy/session"
)

// longData keeps the chunk of COM_STMT_SEND_LONG_DATA p for a parameter of
// ps, for its next execution; no reply is due, even for a malformed
// packet. maxPacket (max_allowed_packet) bounds each parameter, and the
// data of every session's statements counts against packet_memory_total:
// past either, the statement's long data is dropped and marked refused
// (ps.LongSize -1 or -2), and the execution gets the error.
func (s *stmtBudget) longData(ps *session.Stmt, p []byte, maxPacket int) {
	if len(p) < 7 {
		return
	}
	i := int(binary.LittleEndian.Uint16(p[5:7]))
	if i >= ps.NParams {
		return
	}
	if ps.Long == nil {
		ps.Long, ps.HasLong = make([][]byte, ps.NParams), make([]bool, ps.NParams)
	}
	ps.HasLong[i] = true
	switch {
	case ps.LongSize < 0:
		return // already refused: the execution gets the error
	case len(ps.Long[i])+len(p)-7 > maxPacket:
		// max_allowed_packet bounds each parameter, as on MariaDB:
		// the data is dropped; the execution gets the error, as the
		// server reports it (no reply is due here).
		s.clearLong(ps)
		ps.Long, ps.HasLong, ps.LongSize = make([][]byte, ps.NParams), make([]bool, ps.NParams), -1
		return
	case !s.holdLong(len(p) - 7):
		// The data of every session's statements counts against
		// packet_memory_total, as packets being received do.
		s.clearLong(ps)
		ps.Long, ps.HasLong, ps.LongSize = make([][]byte, ps.NParams), make([]bool, ps.NParams), -2
		return
	}
	ps.LongSize += len(p) - 7
	ps.Long[i] = append(ps.Long[i], p[7:]...)
}
