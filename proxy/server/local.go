package server

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/shardgate/shardgate/mysql"
)

// activity is what SHOW PROCESSLIST reports about a session. The owner
// goroutine writes it; SHOW PROCESSLIST in other sessions reads it.
type activity struct {
	mu    sync.Mutex
	cmd   string
	info  string
	since time.Time
}

func (a *activity) set(cmd, info string) {
	now := time.Now()
	a.mu.Lock()
	a.cmd, a.info, a.since = cmd, info, now
	a.mu.Unlock()
}

func (a *activity) get() (cmd, info string, since time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cmd, a.info, a.since
}

// showProcesslist answers SHOW [FULL] PROCESSLIST with the proxy's own
// sessions, so the ids it shows are the ones KILL takes.
func (ss *session) showProcesslist(full bool) error {
	srv := ss.srv
	srv.mu.Lock()
	list := make([]*session, 0, len(srv.sessions))
	for _, o := range srv.sessions {
		list = append(list, o)
	}
	srv.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	cols := []mysql.Column{
		{Name: "Id", Type: mysql.TypeLongLong, Length: 21, Charset: 63, Flags: mysql.FlagNotNull | mysql.FlagNum},
		{Name: "User", Type: mysql.TypeVarString, Length: 128 * 4, Charset: 45},
		{Name: "Host", Type: mysql.TypeVarString, Length: 64 * 4, Charset: 45},
		{Name: "db", Type: mysql.TypeVarString, Length: 64 * 4, Charset: 45},
		{Name: "Command", Type: mysql.TypeVarString, Length: 16 * 4, Charset: 45},
		{Name: "Time", Type: mysql.TypeLong, Length: 7, Charset: 63, Flags: mysql.FlagNotNull | mysql.FlagNum},
		{Name: "State", Type: mysql.TypeVarString, Length: 30 * 4, Charset: 45},
		{Name: "Info", Type: mysql.TypeVarString, Length: 100 * 4, Charset: 45},
	}
	now := time.Now()
	var rows [][][]byte
	for _, o := range list {
		if o.user != ss.user {
			continue // MySQL shows only your own threads without PROCESS
		}
		cmd, info, since := o.act.get()
		state := ""
		if o.idle.Load() {
			cmd, info = "Sleep", ""
		} else {
			state = "executing"
		}
		if !full && len(info) > 100 {
			info = info[:100]
		}
		secs := int64(0)
		if !since.IsZero() {
			secs = int64(now.Sub(since) / time.Second)
		}
		row := [][]byte{
			[]byte(strconv.FormatUint(uint64(o.id), 10)),
			[]byte(o.user),
			[]byte(o.nc.RemoteAddr().String()),
			nullable(o.db),
			[]byte(cmd),
			[]byte(strconv.FormatInt(secs, 10)),
			[]byte(state),
			nullable(info),
		}
		rows = append(rows, row)
	}
	return ss.writeResultSet(cols, rows)
}

func nullable(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// writeResultSet sends a complete text result set built by the proxy.
func (ss *session) writeResultSet(cols []mysql.Column, rows [][][]byte) error {
	c := ss.c
	ss.buf = mysql.AppendLenEncInt(ss.buf[:0], uint64(len(cols)))
	c.WritePacket(ss.buf)
	for i := range cols {
		ss.buf = mysql.AppendColumn(ss.buf[:0], &cols[i])
		c.WritePacket(ss.buf)
	}
	deprecateEOF := ss.caps&mysql.ClientDeprecateEOF != 0
	if !deprecateEOF {
		c.WritePacket(mysql.AppendEOF(ss.buf[:0], 0, ss.status))
	}
	for _, r := range rows {
		ss.buf = mysql.AppendTextRow(ss.buf[:0], r)
		c.WritePacket(ss.buf)
	}
	if deprecateEOF {
		return c.WritePacket(mysql.AppendOK(ss.buf[:0], mysql.EOFHeader, mysql.OK{Status: ss.endStatus()}))
	}
	return c.WritePacket(mysql.AppendEOF(ss.buf[:0], 0, ss.endStatus()))
}
