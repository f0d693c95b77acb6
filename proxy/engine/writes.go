package engine

import (
	"fmt"
	"strings"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// fanout runs a statement that returns no rows on several targets: DML
// on several subtables (a SumOK plan) or DDL on every subtable and node
// (a Fanout plan). It owns what makes those targets look like one
// statement to the client: the OK whose counts, info string and insert
// id are summed over the targets (one copy's for a global table), the
// caller's BeforeOK before that OK goes out, and the one error that says
// which targets failed and which had already applied the statement. The
// targets run one after another, each on a connection borrowed for it.
// Its end also reads the OK of each LOAD DATA of a loadData.
type fanout struct {
	x *Executor
}

// run answers one OK packet, or one error. DML stops at the first
// failure, as one MySQL statement would; DDL runs everywhere so a re-run
// converges.
func (f fanout) run(plan *router.Plan) error {
	x := f.x
	var total mysql.OK
	var info infoSum
	var done, failed []string
	var firstErr *mysql.SQLError
	idSet := false // the insert id came from plan.IDTarget
	for i := range plan.Targets {
		t := &plan.Targets[i]
		where := t.Node
		if t.Subtable != "" {
			where += " " + t.Subtable
		}
		ok, err := f.one(t, plan.Generated > 0, plan.Sticky)
		if err != nil {
			se := mysql.AsSQLError(err)
			if firstErr == nil {
				firstErr = se
			}
			failed = append(failed, where+": "+se.Message)
			if plan.Kind == router.SumOK {
				break
			}
			continue
		}
		done = append(done, where)
		if plan.Copies && len(done) > 1 {
			// Every target holds a copy of the same rows (a global
			// table): the client sees one copy's counts.
			continue
		}
		total.AffectedRows += ok.AffectedRows
		total.Warnings += ok.Warnings
		if i == plan.IDTarget && ok.LastInsertID != 0 {
			idSet = true
			total.LastInsertID = ok.LastInsertID
		} else if !idSet && total.LastInsertID == 0 {
			total.LastInsertID = ok.LastInsertID
		}
		info.add(ok.Info)
	}
	if firstErr != nil {
		msg := firstErr.Message
		if len(plan.Targets) > 1 {
			msg = fmt.Sprintf("failed on %d of %d targets: %s", len(failed), len(plan.Targets), strings.Join(failed, "; "))
			if len(done) > 0 && x.BeforeOK == nil { // with BeforeOK, the caller's transaction undoes them
				msg += "; already applied on: " + strings.Join(done, ", ")
			}
		}
		return &mysql.SQLError{Code: firstErr.Code, State: firstErr.State, Message: msg}
	}
	total.Info = info.String()
	if plan.Generated > 0 {
		// The values came from a global sequence, not from the
		// subtables' AUTO_INCREMENT: the statement's id is the first.
		total.LastInsertID = plan.FirstID
	}
	if x.BeforeOK != nil {
		if err := x.BeforeOK(); err != nil {
			return err
		}
	}
	return x.w.OK(total)
}

// one runs one write target and reads its OK or ERR. sequenced says
// the statement carries global sequence values: the server reports the
// first as the insert id, but they are explicit values to it, which do not
// change the connection's LAST_INSERT_ID().
//
// sticky says the statement leaves state on the connection (LOCK TABLES):
// the session keeps it.
func (f fanout) one(t *router.Target, sequenced, sticky bool) (mysql.OK, error) {
	x := f.x
	bc, err := x.send(t)
	if err != nil {
		return mysql.OK{}, err
	}
	x.conns.Running(bc)
	defer x.conns.Running(nil)
	return f.end(bc, t.Node, sequenced, sticky)
}

// end reads the OK or ERR that ends a write on bc and gives bc back to
// the session; anything else breaks the connection.
func (f fanout) end(bc *backend.Conn, node string, sequenced, sticky bool) (mysql.OK, error) {
	x := f.x
	p, err := bc.ReadPacket()
	if err != nil {
		bc.MarkBroken()
		x.conns.Release(bc, false, backend.Outcome{})
		return mysql.OK{}, mysql.NewError(mysql.ErServerLost, "Lost connection to backend %s during query: %v", bc.Addr, err)
	}
	switch {
	case len(p) > 0 && p[0] == mysql.ErrHeader:
		e := mysql.ParseErr(p)
		x.conns.Release(bc, false, backend.Outcome{})
		return mysql.OK{}, e
	case len(p) > 0 && p[0] == mysql.OKHeader:
		ok, state, err := bc.ParseOK(p)
		if err != nil {
			bc.MarkBroken()
			x.conns.Release(bc, false, backend.Outcome{})
			return mysql.OK{}, err
		}
		if tw, isTW := x.w.(TargetStateWriter); isTW && state != nil {
			tw.NoteTargetState(state)
		}
		insertID := ok.LastInsertID
		if sequenced && insertID != 0 {
			insertID, bc.LastInsertID = 0, backend.UnknownInsertID
		}
		x.conns.Release(bc, sticky, backend.Outcome{OK: true, Status: ok.Status, Warnings: ok.Warnings, InsertID: insertID,
			StateChanged: ok.Status&mysql.StatusSessionStateChange != 0, State: state})
		ok.Status &^= mysql.StatusSessionStateChange
		return ok, nil
	}
	// A result set (e.g. DDL that returns rows) is not expected here.
	bc.MarkBroken()
	x.conns.Release(bc, false, backend.Outcome{})
	return mysql.OK{}, mysql.NewError(mysql.ErNotSupported, "statement on %s returned a result set where an OK was expected", node)
}

// infoSum adds up the info strings of OK packets ("Rows matched: 1
// Changed: 1  Warnings: 0", "Records: 3  Duplicates: 0  Warnings: 0").
type infoSum struct {
	kind       int // 0 none, 1 matched/changed, 2 records/duplicates, 3 records/deleted/skipped (LOAD DATA), -1 other
	a, b, c, w uint64
	other      string
}

func (s *infoSum) add(info string) {
	if info == "" {
		return
	}
	var a, b, c, w uint64
	switch {
	case s.kind >= 0 && (s.kind == 0 || s.kind == 3) && strings.HasPrefix(info, "Records: ") && strings.Contains(info, "Deleted: "):
		if n, err := fmt.Sscanf(info, "Records: %d  Deleted: %d  Skipped: %d  Warnings: %d", &a, &b, &c, &w); err != nil || n != 4 {
			s.kind, s.other = -1, info
			return
		}
		s.kind = 3
	case s.kind >= 0 && scan3(info, "Rows matched: %d  Changed: %d  Warnings: %d", &a, &b, &w) && s.kind != 2:
		s.kind = 1
	case s.kind >= 0 && scan3(info, "Records: %d  Duplicates: %d  Warnings: %d", &a, &b, &w) && s.kind != 1:
		s.kind = 2
	default:
		s.kind, s.other = -1, info
		return
	}
	s.a, s.b, s.c, s.w = s.a+a, s.b+b, s.c+c, s.w+w
}

func scan3(s, format string, a, b, w *uint64) bool {
	n, err := fmt.Sscanf(s, format, a, b, w)
	return err == nil && n == 3
}

func (s *infoSum) String() string {
	switch s.kind {
	case 1:
		return fmt.Sprintf("Rows matched: %d  Changed: %d  Warnings: %d", s.a, s.b, s.w)
	case 2:
		return fmt.Sprintf("Records: %d  Duplicates: %d  Warnings: %d", s.a, s.b, s.w)
	case 3:
		return fmt.Sprintf("Records: %d  Deleted: %d  Skipped: %d  Warnings: %d", s.a, s.b, s.c, s.w)
	case -1:
		return s.other
	}
	return ""
}
