package backend

import "time"

// TrimGrownForTest runs the health loop's trim of grown idle connections
// as at now.
func (n *Node) TrimGrownForTest(now time.Time) { n.trimGrown(now) }
