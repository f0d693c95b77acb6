package admin

import (
	"strconv"
	"strings"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/digest"
	"github.com/shardgate/shardgate/mysql"
)

// The columns of show node status, show schema config and show shardgate
// digest (also the keys of GET /admin/config's objects). Fresh each call:
// a result set's writer may keep pointers to them.
func nodeColumns() []mysql.Column {
	return textColumns("Node", "Address", "Type", "State", "Usable", "Lag", "InUse", "Idle", "MaxConn", "Reads")
}

func schemaColumns() []mysql.Column {
	return textColumns("User", "DB", "Table", "Type", "Key", "Nodes_List", "Locations", "TableRowLimit", "Default", "RW_Split", "Read_Consistency")
}

func digestColumns() []mysql.Column {
	return textColumns("Fingerprint", "User", "Schema", "Route", "Count", "Overcount", "Total_us", "Min_us", "Max_us",
		"P99_us", "Rows_Sent", "Errors", "First_Seen", "Last_Seen")
}

func textColumns(names ...string) []mysql.Column {
	cols := make([]mysql.Column, len(names))
	for i, n := range names {
		cols[i] = mysql.Column{Name: n, Type: mysql.TypeVarString, Length: 256 * 4, Charset: 45}
	}
	return cols
}

func rowOf(vals ...string) [][]byte {
	r := make([][]byte, len(vals))
	for i, v := range vals {
		r[i] = []byte(v)
	}
	return r
}

// proxyConfigRows is admin server ... ('show', 'proxy', 'config').
func (c *Console) proxyConfigRows() [][][]byte {
	cfg, version := c.env.Config()
	var users, nodes []string
	for _, u := range cfg.Users {
		users = append(users, u.User)
	}
	for _, n := range cfg.Nodes {
		nodes = append(nodes, n.Name)
	}
	return [][][]byte{
		rowOf("Addr", cfg.Addr),
		rowOf("User_List", strings.Join(users, ",")),
		rowOf("LogLevel", cfg.LogLevel),
		rowOf("SlowLogTime", strconv.Itoa(cfg.SlowLogTime)),
		rowOf("AllowIPs", cfg.AllowIPs),
		rowOf("Nodes_Count", strconv.Itoa(len(nodes))),
		rowOf("Nodes_List", strings.Join(nodes, ",")),
		rowOf("ClientConns", strconv.Itoa(c.env.Sessions())),
		rowOf("Queries", strconv.FormatUint(c.env.Queries(), 10)),
		rowOf("TransactionMode", cfg.TransactionMode),
		rowOf("ConfigVersion", strconv.FormatUint(version, 10)),
	}
}

// nodeRows is show node status: masters and replicas with their state.
func nodeRows(nodes []*backend.Node) [][][]byte {
	var rows [][][]byte
	state := func(up, adminDown bool) string {
		switch {
		case adminDown:
			return "down (admin)"
		case up:
			return "up"
		}
		return "down"
	}
	for _, n := range nodes {
		st := n.Stats()
		rows = append(rows, rowOf(n.Name, n.Addr(), "master", state(st.Up, n.AdminDown()), "-", "-",
			strconv.Itoa(st.InUse), strconv.Itoa(st.Idle), strconv.Itoa(st.Max), "-"))
		for _, r := range n.Replicas() {
			rs, ps := r.Status(), r.Stats()
			usable, lag := "yes", "-"
			if !rs.Usable {
				usable = "no: " + rs.Why
			}
			if rs.Lag >= 0 {
				lag = rs.Lag.Round(time.Second).String()
			}
			rows = append(rows, rowOf(n.Name, r.Addr(), "slave@"+strconv.Itoa(r.Weight()), state(ps.Up, r.AdminDown()), usable, lag,
				strconv.Itoa(ps.InUse), strconv.Itoa(ps.Idle), strconv.Itoa(ps.Max), strconv.FormatUint(r.Reads(), 10)))
		}
	}
	return rows
}

// schemaRows is admin server ... ('show', 'schema', 'config').
func schemaRows(cfg *config.Config) [][][]byte {
	var rows [][][]byte
	for _, sc := range cfg.Schemas {
		split := "on"
		if !sc.ReadSplit() {
			split = "off"
		}
		rows = append(rows, rowOf(sc.User, "", "", "default", "", strings.Join(sc.Nodes, ", "), "", "0", sc.Default, split, sc.Consistency()))
		for _, r := range sc.Shard {
			locs := make([]string, len(r.Locations))
			for i, l := range r.Locations {
				locs[i] = strconv.Itoa(l)
			}
			rows = append(rows, rowOf(sc.User, r.DB, r.Table, r.Type, r.Key, strings.Join(r.Nodes, ", "), strings.Join(locs, ", "),
				strconv.Itoa(r.TableRowLimit), sc.Default, split, sc.Consistency()))
		}
	}
	return rows
}

// digestRows is show shardgate digest: one row per statement shape.
func digestRows(shapes []digest.Row) [][][]byte {
	var rows [][][]byte
	for _, r := range shapes {
		rows = append(rows, rowOf(r.Fingerprint, r.User, r.Schema, r.Route, strconv.FormatUint(r.Count, 10), strconv.FormatUint(r.Overcount, 10),
			strconv.FormatInt(r.Total.Microseconds(), 10), strconv.FormatInt(r.Min.Microseconds(), 10), strconv.FormatInt(r.Max.Microseconds(), 10),
			strconv.FormatInt(r.P99.Microseconds(), 10), strconv.FormatUint(r.Rows, 10), strconv.FormatUint(r.Errors, 10),
			r.First.UTC().Format("2006-01-02 15:04:05"), r.Last.UTC().Format("2006-01-02 15:04:05")))
	}
	return rows
}
