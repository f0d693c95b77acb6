package engine

import (
	"errors"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// stream is one target's text result set, read row by row from its
// backend connection (or from memory once buffered). It is a rowIter: row
// values alias the connection's read buffer and are valid until the next
// call.
type stream struct {
	bc    *backend.Conn
	ncols int
	vals  [][]byte
	done  bool // the end (EOF or ERR) was read
	res   backend.Outcome

	// rows holds the raw row packets of a buffered stream (see
	// merger.buffer); drained is true once its connection has nothing
	// more to read.
	rows    [][]byte
	drained bool
}

func (s *stream) next() ([][]byte, []byte, error) {
	if s.done {
		return nil, nil, nil
	}
	var p []byte
	if s.drained {
		if len(s.rows) == 0 {
			s.done = true
			return nil, nil, nil
		}
		p, s.rows = s.rows[0], s.rows[1:]
	} else {
		var err error
		if p, err = s.bc.ReadPacket(); err != nil {
			return nil, nil, s.lost()
		}
		if mysql.IsEOF(p) {
			s.done = true
			s.res.SetInfo(p)
			return nil, nil, nil
		}
		if len(p) > 0 && p[0] == mysql.ErrHeader {
			s.done = true
			return nil, nil, mysql.ParseErr(p)
		}
	}
	vals, err := mysql.ParseTextRow(p, s.ncols, s.vals)
	if err != nil {
		return nil, nil, s.lost()
	}
	s.vals = vals
	return vals, p, nil
}

// lost marks the stream's connection broken and returns the client's error.
func (s *stream) lost() error {
	s.bc.MarkBroken()
	return backend.ErrLost(s.bc)
}

// drain reads the rest of the stream, so its connection can go back to the
// pool; a failure marks it broken.
func (s *stream) drain() {
	for !s.done {
		if _, _, err := s.next(); err != nil {
			var se *mysql.SQLError
			if !errors.As(err, &se) || se.Code == mysql.ErServerLost {
				s.bc.MarkBroken()
			}
			return
		}
	}
}
