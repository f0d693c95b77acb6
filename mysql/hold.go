package mysql

// holder keeps the packets written between Hold and Unhold in memory,
// up to limit bytes; past it, what it kept and the rest go to the
// network as usual.
type holder struct {
	c     *Conn
	buf   []byte
	limit int
	over  bool
}

func (h *holder) Write(p []byte) (int, error) {
	if !h.over {
		if len(h.buf)+len(p) <= h.limit {
			h.buf = append(h.buf, p...)
			return len(p), nil
		}
		h.over = true
		if _, err := h.c.netWriter().Write(h.buf); err != nil {
			return 0, err
		}
		h.buf = nil
	}
	return h.c.netWriter().Write(p)
}

// Hold keeps the packets written from now on in memory instead of
// sending them, up to limit bytes:
// Unhold then returns them, framed and numbered for this connection, for
// the caller to send (WriteRaw) or drop. An answer longer than limit
// goes out as it comes once it passes limit, from its first byte. Bytes
// written before Hold are sent first. It reports false, holding nothing,
// on a compressed connection, whose frames carry their own numbers.
func (c *Conn) Hold(limit int) bool {
	if c.z != nil || c.hold != nil {
		return false
	}
	if c.bw != nil && c.bw.Buffered() > 0 {
		if err := c.Flush(); err != nil {
			return false
		}
	}
	c.hold = &holder{c: c, limit: limit}
	return true
}

// Unhold ends Hold. ok is false when the answer passed Hold's limit: it
// went, or goes at the next Flush, to the network, and held is nil.
// Otherwise held is every byte written since Hold, and nothing of it
// was sent.
func (c *Conn) Unhold() (held []byte, ok bool) {
	h := c.hold
	c.hold = nil
	if h == nil || h.over {
		return nil, false
	}
	return h.buf, true
}
