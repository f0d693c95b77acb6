package server

// PacketMemory reports the bytes the client packets being received hold
// now (their buffers beyond the read buffers, compressed or not), the
// packet_memory_total they share, and how many packets it refused.
func (s *Server) PacketMemory() (inUse, limit int64, refused uint64) {
	return s.packets.InUse(), s.packets.Limit(), s.packets.Refused()
}
