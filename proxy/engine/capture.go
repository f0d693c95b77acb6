package engine

import (
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// Captured is the result of a plan run by Capture: its columns, how many
// rows it had, the first of them (nil when none), and the warnings.
type Captured struct {
	Columns  []*mysql.Column
	Rows     int
	First    [][]byte
	Warnings uint16
}

// Capture runs a Concat plan (with or without a merge) as Execute would,
// but keeps its result instead of sending it: the caller assigns a
// SELECT ... INTO @variables row computed over several targets. Only the
// first row is kept; the others are counted. An error a backend answered
// reaches the client as it would from Execute (ErrAnswered).
func (x *Executor) Capture(plan *router.Plan) (*Captured, error) {
	c := &capture{inner: x.w}
	x.w, x.capturing = c, true
	defer func() { x.w, x.capturing = c.inner, false }()
	rows := x.Rows
	err := x.Execute(plan, "")
	x.Rows = rows // nothing reached the client
	return &c.res, err
}

// capture is the Writer of Capture: it keeps what it is given, and sends
// the client nothing but a relayed error (Client).
type capture struct {
	inner Writer
	res   Captured
}

func (c *capture) Fields(cols []*mysql.Column, raw [][]byte) error {
	n := max(len(cols), len(raw))
	c.res.Columns = make([]*mysql.Column, n)
	for i := range n {
		if i < len(cols) && cols[i] != nil {
			c.res.Columns[i] = cols[i]
			continue
		}
		col, err := mysql.ParseColumn(raw[i])
		if err != nil {
			return err
		}
		c.res.Columns[i] = col
	}
	return nil
}

func (c *capture) Row(vals [][]byte, _ []byte) error {
	c.res.Rows++
	if c.res.Rows == 1 {
		c.res.First = make([][]byte, len(vals))
		for i, v := range vals {
			if v != nil {
				c.res.First[i] = append([]byte{}, v...)
			}
		}
	}
	return nil
}

func (c *capture) End(warnings uint16) error { c.res.Warnings = warnings; return nil }

func (c *capture) OK(mysql.OK) error { return nil }

// TextRows: the targets answer in the text protocol (an exact fallback's
// statement runs as text); Executor.capturing has their rows handed to
// Row as values, not relayed.
func (c *capture) TextRows() bool { return true }

func (c *capture) Client() *mysql.Conn { return c.inner.Client() }
