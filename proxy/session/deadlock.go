package session

import "github.com/shardgate/shardgate/backend"

// AppendPinned appends the connections the session holds (those of its
// open transaction, inside one) to dst: the deadlock detector maps their
// backend threads to the session's transaction.
func (s *State) AppendPinned(dst []*backend.Conn) []*backend.Conn {
	return append(dst, s.pinned...)
}
