package mysql

import "sync/atomic"

// ErOutOfResources is ER_OUT_OF_RESOURCES (1041, SQLSTATE HY000): the
// server's answer when it cannot find the memory a command needs.
const ErOutOfResources uint16 = 1041

// ErrPacketMemory is returned by ReadPacket when the Budget the Conn shares
// with others cannot hold the packet being read: the packets of other
// connections already hold it. The packet is dropped (read to its end when
// DiscardOversized is set), so the memory goes back at once.
var ErrPacketMemory = NewError(ErOutOfResources, "Out of memory: the proxy holds its packet_memory_total for packets being received; try again later")

// Budget bounds the memory several Conns hold together for packets larger
// than their read buffers (the logical packet being read, however it
// arrives: in physical packets of 16 MiB, or inflated from compressed
// frames). A Conn takes from it as its packet buffer grows with the bytes
// received, and gives it back at its next read or at Release.
//
// A Budget is safe for concurrent use.
type Budget struct {
	limit   atomic.Int64
	used    atomic.Int64
	refused atomic.Uint64
}

// NewBudget returns a Budget of limit bytes (0: no limit, only counted).
func NewBudget(limit int64) *Budget {
	b := &Budget{}
	b.limit.Store(limit)
	return b
}

// SetLimit changes the limit (a configuration reload); memory already
// held above a lowered limit is kept until it is given back.
func (b *Budget) SetLimit(limit int64) { b.limit.Store(limit) }

// Limit returns the limit in bytes (0: none).
func (b *Budget) Limit() int64 { return b.limit.Load() }

// InUse returns the bytes held now.
func (b *Budget) InUse() int64 { return b.used.Load() }

// Refused returns how many packets were refused because the Budget was
// spent.
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// take reserves n bytes; it reports false, reserving nothing, when that
// would pass the limit.
func (b *Budget) take(n int64) bool {
	if n <= 0 {
		return true
	}
	limit := b.limit.Load()
	if limit <= 0 {
		b.used.Add(n)
		return true
	}
	for {
		u := b.used.Load()
		if u+n > limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Take reserves n bytes for memory held outside a Conn's packet buffer (a
// prepared statement's long data); it reports false, reserving nothing,
// when that would pass the limit (counted as refused).
func (b *Budget) Take(n int64) bool {
	if !b.take(n) {
		b.refused.Add(1)
		return false
	}
	return true
}

// Give returns n bytes Take reserved.
func (b *Budget) Give(n int64) { b.give(n) }

// give returns n bytes taken before.
func (b *Budget) give(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}
