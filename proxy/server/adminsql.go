package server

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/proxy/engine"
)

// kingshard's admin SQL, for admin_user on the client port:
//
//	admin node(opt,node,k,v) values('add'|'del'|'up'|'down', 'node1', 'slave'|'master', 'host:port')
//	admin server(opt,k,v) values('show', 'proxy'|'node'|'schema', 'config')
//	admin server(opt,k,v) values('add'|'del', 'allow_ip', '10.0.0.0/8')
//	admin server(opt,k,v) values('change', 'slow_log_time', '100')
//	show proxy config | show node status | show node config | show schema config
//
// and shardgate's data movement (see move.go):
//
//	admin reshard(opt,table,nodes,locations) values('start', 'db.t', 'node1,node2,node3', '3,3,2')
//	admin import(opt,table,source,source_table) values('start', 'db.t', 'user:password@host:port', 'db.t')
//	admin workflow(opt,name) values('cutover'|'rollback'|'complete'|'cancel'|'verify'|'repair', 'name')
//	show workflow status
//
// and the query digest (metrics.go):
//
//	show shardgate digest
//	admin digest(opt) values('reset')
//
// Node changes act at once and last until the next reload or restart
// (ks.yaml is not written); server changes go through Reload, so they
// are validated like a reloaded file.
var (
	adminRE       = regexp.MustCompile(`(?is)^\s*admin\s+(node|server|reshard|import|workflow|digest)\s*\(([^)]*)\)\s*values\s*\((.*)\)\s*;?\s*$`)
	adminShowRE   = regexp.MustCompile(`(?is)^\s*show\s+(proxy|node|schema|workflow)\s+(config|status)\s*;?\s*$`)
	adminDigestRE = regexp.MustCompile(`(?is)^\s*show\s+shardgate\s+digest\s*;?\s*$`)
	adminValueRE  = regexp.MustCompile(`\s*'((?:[^'\\]|\\.|'')*)'\s*(,|$)`)
)

// adminSQL handles sql when it is admin SQL; handled is false otherwise.
func (h *handler) adminSQL(sql, keyword string) (handled bool, err error) {
	var m []string
	switch keyword {
	case "ADMIN":
		if m = adminRE.FindStringSubmatch(sql); m == nil {
			return true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: shardgate's admin SQL is admin node(opt,node,k,v) values(...) or admin server(opt,k,v) values(...)")
		}
	case "SHOW":
		if adminDigestRE.MatchString(sql) {
			m = []string{sql, "digest", "opt", "'show'"}
			break
		}
		show := adminShowRE.FindStringSubmatch(sql)
		if show == nil {
			return false, nil
		}
		m = []string{sql, "server", "opt,k,v", fmt.Sprintf("'show','%s','config'", strings.ToLower(show[1]))}
	default:
		return false, nil
	}
	c := h.c
	if admin := c.srv.cfg().AdminUser; admin == "" || c.user != admin {
		return true, mysql.NewError(mysql.ErSpecificAccessDenied, "Access denied; you need to be the proxy's admin_user to run shardgate's admin SQL")
	}
	vals, ok := adminValues(m[3])
	if !ok {
		return true, mysql.NewError(mysql.ErSyntax, "You have an error in your SQL syntax: the values of admin SQL are quoted strings, as in values('add','node1','slave','127.0.0.1:3307')")
	}
	switch strings.ToLower(m[1]) {
	case "node":
		return true, h.adminNode(vals)
	case "reshard", "import", "workflow":
		return true, h.adminMove(strings.ToLower(m[1]), vals)
	case "digest":
		return true, h.adminDigest(vals)
	}
	if len(vals) == 3 && vals[0] == "show" && vals[1] == "workflow" {
		return true, h.adminMove("show", nil)
	}
	return true, h.adminServer(vals)
}

func adminValues(s string) ([]string, bool) {
	var out []string
	for rest := strings.TrimSpace(s); rest != ""; {
		m := adminValueRE.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return nil, false
		}
		out = append(out, strings.ReplaceAll(rest[m[2]:m[3]], "''", "'"))
		rest = rest[m[1]:]
	}
	return out, len(out) > 0
}

func (h *handler) adminNode(v []string) error {
	srv := h.c.srv
	if len(v) != 4 {
		return mysql.NewError(mysql.ErWrongArguments, "admin node takes four values: opt ('add', 'del', 'up', 'down'), node, k ('master' or 'slave'), v (host:port)")
	}
	opt, name, kind, addr := strings.ToLower(v[0]), v[1], strings.ToLower(v[2]), v[3]
	n := srv.nodes[name]
	if n == nil {
		return mysql.NewError(mysql.ErWrongArguments, "there is no node %q", name)
	}
	switch kind {
	case "master":
		if addr != n.Addr() {
			return mysql.NewError(mysql.ErWrongArguments, "node %s's master is %s, not %s", name, n.Addr(), addr)
		}
		switch opt {
		case "down":
			n.SetAdminDown(true)
		case "up":
			n.SetAdminDown(false)
		default:
			return mysql.NewError(mysql.ErWrongArguments, "a master can be taken 'down' or brought 'up', not %q (add and remove nodes in ks.yaml)", opt)
		}
	case "slave":
		list := replicaList(n.Replicas())
		i := -1
		for j, r := range list {
			if r.Addr == addr {
				i = j
			}
		}
		switch opt {
		case "add":
			if i >= 0 {
				return mysql.NewError(mysql.ErWrongArguments, "%s is already a replica of node %s", addr, name)
			}
			if err := config.CheckBackendAddr(addr); err != nil {
				return mysql.NewError(mysql.ErWrongArguments, "%v", err)
			}
			n.SetReplicas(append(list, config.Replica{Addr: addr, Weight: 1}))
			srv.hasReplicas.Store(true)
		case "del":
			if i < 0 {
				return mysql.NewError(mysql.ErWrongArguments, "%s is not a replica of node %s", addr, name)
			}
			n.SetReplicas(append(list[:i:i], list[i+1:]...))
		case "up", "down":
			if i < 0 {
				return mysql.NewError(mysql.ErWrongArguments, "%s is not a replica of node %s", addr, name)
			}
			n.Replicas()[i].SetAdminDown(opt == "down")
		default:
			return mysql.NewError(mysql.ErWrongArguments, "unknown opt %q: use 'add', 'del', 'up' or 'down'", opt)
		}
	default:
		return mysql.NewError(mysql.ErWrongArguments, "k must be 'master' or 'slave', not %q", kind)
	}
	h.c.log.Info("admin node", zap.String("opt", opt), zap.String("node", name), zap.String("k", kind), zap.String("v", addr))
	return h.c.writeOK(mysql.OK{AffectedRows: 1, Status: h.c.status()})
}

// replicaList is the configuration of replicas as they are now.
func replicaList(reps []*backend.Replica) []config.Replica {
	out := make([]config.Replica, len(reps))
	for i, r := range reps {
		out[i] = config.Replica{Addr: r.Addr(), Weight: r.Weight()}
	}
	return out
}

func (h *handler) adminServer(v []string) error {
	c, srv := h.c, h.c.srv
	if len(v) != 3 {
		return mysql.NewError(mysql.ErWrongArguments, "admin server takes three values: opt, k, v")
	}
	opt, k, val := strings.ToLower(v[0]), strings.ToLower(v[1]), v[2]
	switch {
	case opt == "show" && k == "proxy":
		return engine.WriteResultSet(c, textColumns("Key", "Value"), srv.proxyConfigRows())
	case opt == "show" && k == "node":
		return engine.WriteResultSet(c, textColumns("Node", "Address", "Type", "State", "Usable", "Lag", "InUse", "Idle", "MaxConn", "Reads"), srv.nodeRows())
	case opt == "show" && k == "schema":
		return engine.WriteResultSet(c, textColumns("User", "DB", "Table", "Type", "Key", "Nodes_List", "Locations", "TableRowLimit", "Default", "RW_Split", "Read_Consistency"), srv.schemaRows())
	}
	// Changes go through Reload: a copy of the configuration in force with
	// the one change, validated like a file.
	next := *srv.cfg()
	switch {
	case (opt == "add" || opt == "del") && (k == "allow_ip" || k == "allow_ips"):
		list := splitComma(next.AllowIPs)
		i := slices.Index(list, val)
		switch {
		case opt == "add" && i < 0:
			list = append(list, val)
		case opt == "del" && i >= 0:
			list = slices.Delete(list, i, i+1)
		case opt == "del":
			return mysql.NewError(mysql.ErWrongArguments, "%q is not in allow_ips", val)
		}
		next.AllowIPs = strings.Join(list, ",")
	case opt == "change" && k == "slow_log_time":
		ms, err := strconv.Atoi(val)
		if err != nil {
			return mysql.NewError(mysql.ErWrongArguments, "slow_log_time is a number of milliseconds, not %q", val)
		}
		next.SlowLogTime = ms
	case k == "black_sql" || k == "blacklist_sql_file":
		return mysql.NewError(mysql.ErNotSupported, "the statement blacklist is read from blacklist_sql_file: edit the file and reload (SIGHUP or POST /admin/reload)")
	default:
		return mysql.NewError(mysql.ErWrongArguments, "unknown admin server command (%s, %s): use ('show', 'proxy'|'node'|'schema', 'config'), ('add'|'del', 'allow_ip', ...) or ('change', 'slow_log_time', ...)", opt, k)
	}
	if err := srv.Reload(&next); err != nil {
		return mysql.NewError(mysql.ErWrongArguments, "%v", err)
	}
	return c.writeOK(mysql.OK{AffectedRows: 1, Status: c.status()})
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
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
func (s *Server) proxyConfigRows() [][][]byte {
	lv := s.lv()
	cfg := lv.cfg
	var users, nodes []string
	for _, u := range cfg.Users {
		users = append(users, u.User)
	}
	for _, n := range cfg.Nodes {
		nodes = append(nodes, n.Name)
	}
	s.mu.Lock()
	conns := len(s.sessions)
	s.mu.Unlock()
	return [][][]byte{
		rowOf("Addr", cfg.Addr),
		rowOf("User_List", strings.Join(users, ",")),
		rowOf("LogLevel", cfg.LogLevel),
		rowOf("SlowLogTime", strconv.Itoa(cfg.SlowLogTime)),
		rowOf("AllowIPs", cfg.AllowIPs),
		rowOf("Nodes_Count", strconv.Itoa(len(nodes))),
		rowOf("Nodes_List", strings.Join(nodes, ",")),
		rowOf("ClientConns", strconv.Itoa(conns)),
		rowOf("Queries", strconv.FormatUint(s.queries.Load(), 10)),
		rowOf("TransactionMode", cfg.TransactionMode),
		rowOf("ConfigVersion", strconv.FormatUint(lv.version, 10)),
	}
}

// nodeRows is show node status: masters and replicas with their state.
func (s *Server) nodeRows() [][][]byte {
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
	for _, n := range s.order {
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
func (s *Server) schemaRows() [][][]byte {
	var rows [][][]byte
	for _, sc := range s.cfg().Schemas {
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

// adminDigest shows or resets the query digest.
func (h *handler) adminDigest(v []string) error {
	c, d := h.c, h.c.srv.metrics.digest
	if d == nil {
		return mysql.NewError(mysql.ErNotSupported, "the query digest is off (digest_size: 0)")
	}
	switch strings.ToLower(v[0]) {
	case "show":
		var rows [][][]byte
		for _, r := range d.Snapshot() {
			rows = append(rows, rowOf(r.Fingerprint, r.User, r.Schema, r.Route, strconv.FormatUint(r.Count, 10), strconv.FormatUint(r.Overcount, 10),
				strconv.FormatInt(r.Total.Microseconds(), 10), strconv.FormatInt(r.Min.Microseconds(), 10), strconv.FormatInt(r.Max.Microseconds(), 10),
				strconv.FormatInt(r.P99.Microseconds(), 10), strconv.FormatUint(r.Rows, 10), strconv.FormatUint(r.Errors, 10),
				r.First.UTC().Format("2006-01-02 15:04:05"), r.Last.UTC().Format("2006-01-02 15:04:05")))
		}
		return engine.WriteResultSet(c, textColumns("Fingerprint", "User", "Schema", "Route", "Count", "Overcount", "Total_us", "Min_us", "Max_us",
			"P99_us", "Rows_Sent", "Errors", "First_Seen", "Last_Seen"), rows)
	case "reset":
		d.Reset()
		return c.writeOK(mysql.OK{Status: c.status()})
	}
	return mysql.NewError(mysql.ErWrongArguments, "admin digest(opt) values('reset'), or show shardgate digest")
}
