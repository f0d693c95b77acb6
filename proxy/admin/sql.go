package admin

import (
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/router"
)

// kingshard's admin SQL, for admin_user on the client port:
//
//	admin node(opt,node,k,v) values('add'|'del'|'up'|'down', 'node1', 'slave'|'master', 'host:port')
//	admin server(opt,k,v) values('show', 'proxy'|'node'|'schema', 'config')
//	admin server(opt,k,v) values('add'|'del', 'allow_ip', '10.0.0.0/8')
//	admin server(opt,k,v) values('change', 'slow_log_time', '100')
//	show proxy config | show node status | show node config | show schema config
//
// and shardgate's data movement (workflows.go):
//
//	admin reshard(opt,table,nodes,locations) values('start', 'db.t', 'node1,node2,node3', '3,3,2')
//	admin import(opt,table,source,source_table) values('start', 'db.t', 'user:password@host:port', 'db.t')
//	admin workflow(opt,name) values('cutover'|'rollback'|'complete'|'cancel'|'verify'|'repair', 'name')
//	show workflow status
//
// and the query digest (proxy/metrics):
//
//	show shardgate digest
//	admin digest(opt) values('reset')
//
// Node changes act at once and last until the next reload or restart
// (ks.yaml is not written); server changes go through Reload, so they
// are validated like a reloaded file. The router reads these statements
// (router.ParseAdmin); this file acts on them.

// Result is the answer to an admin statement: a result set when Columns
// is set, else OK with Affected rows and Info.
type Result struct {
	Columns  []mysql.Column
	Rows     [][][]byte
	Affected uint64
	Info     string
}

// Session is the client session that sent an admin statement.
type Session struct {
	User string
	Log  *zap.Logger // the session's logger
}

// SQL answers sql when it is admin SQL (keyword is its first keyword, as
// the router classified it; router.ParseAdmin reads it); handled is false
// otherwise, and the server runs the statement as usual.
func (c *Console) SQL(s Session, sql, keyword string) (res Result, handled bool, err error) {
	a, ok, err := router.ParseAdmin(sql, keyword)
	if !ok || err != nil {
		return res, ok, err
	}
	if admin := c.cfg().AdminUser; admin == "" || s.User != admin {
		return res, true, c.notAdmin(admin)
	}
	vals := a.Values
	switch a.Target {
	case "node":
		res, err = c.adminNode(s, vals)
	case "reshard", "import", "workflow":
		res, err = c.flows.sql(a.Target, vals)
	case "digest":
		res, err = c.adminDigest(vals)
	default:
		if len(vals) == 3 && vals[0] == "show" && vals[1] == "workflow" {
			res, err = c.flows.sql("show", nil)
		} else {
			res, err = c.adminServer(vals)
		}
	}
	return res, true, err
}

// notAdmin is the refusal of admin SQL to a user other than admin_user
// (1227, as MariaDB refuses a statement that needs a privilege): it says
// how to be allowed, naming the key and the file it is set in, and not
// who the admin user is.
func (c *Console) notAdmin(admin string) error {
	file := "the proxy's configuration file (ks.yaml)"
	if p := c.env.ConfigPath; p != "" {
		file = p
	}
	const head = "Access denied; you need to be the proxy's admin_user to run shardgate's admin SQL"
	if admin == "" {
		return mysql.NewError(mysql.ErSpecificAccessDenied, head+", and none is set: add `admin_user: <name>` (a user of user_list) at the top level of %s, then reload it (SIGHUP or POST /admin/reload) or restart the proxy", file)
	}
	return mysql.NewError(mysql.ErSpecificAccessDenied, head+": connect as the user that admin_user names in %s", file)
}

func (c *Console) adminNode(s Session, v []string) (Result, error) {
	if len(v) != 4 {
		return Result{}, mysql.NewError(mysql.ErWrongArguments, "admin node takes four values: opt ('add', 'del', 'up', 'down'), node, k ('master' or 'slave'), v (host:port)")
	}
	opt, name, kind, addr := strings.ToLower(v[0]), v[1], strings.ToLower(v[2]), v[3]
	n := c.node(name)
	if n == nil {
		return Result{}, mysql.NewError(mysql.ErWrongArguments, "there is no node %q", name)
	}
	if err := c.changeNode(n, opt, kind, addr); err != nil {
		return Result{}, err
	}
	s.Log.Info("admin node", zap.String("opt", opt), zap.String("node", name), zap.String("k", kind), zap.String("v", addr))
	return Result{Affected: 1}, nil
}

// changeNode applies admin node's opt to n's master or one of its replicas.
func (c *Console) changeNode(n *backend.Node, opt, kind, addr string) error {
	name := n.Name
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
			c.env.ReplicaAdded()
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
	return nil
}

// replicaList is the configuration of replicas as they are now.
func replicaList(reps []*backend.Replica) []config.Replica {
	out := make([]config.Replica, len(reps))
	for i, r := range reps {
		out[i] = config.Replica{Addr: r.Addr(), Weight: r.Weight()}
	}
	return out
}

func (c *Console) adminServer(v []string) (Result, error) {
	if len(v) != 3 {
		return Result{}, mysql.NewError(mysql.ErWrongArguments, "admin server takes three values: opt, k, v")
	}
	opt, k, val := strings.ToLower(v[0]), strings.ToLower(v[1]), v[2]
	switch {
	case opt == "show" && k == "proxy":
		return Result{Columns: textColumns("Key", "Value"), Rows: c.proxyConfigRows()}, nil
	case opt == "show" && k == "node":
		return Result{Columns: nodeColumns(), Rows: nodeRows(c.env.Nodes())}, nil
	case opt == "show" && k == "schema":
		return Result{Columns: schemaColumns(), Rows: schemaRows(c.cfg())}, nil
	}
	// Changes go through Reload: a copy of the configuration in force with
	// the one change, validated like a file.
	next := *c.cfg()
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
			return Result{}, mysql.NewError(mysql.ErWrongArguments, "%q is not in allow_ips", val)
		}
		next.AllowIPs = strings.Join(list, ",")
	case opt == "change" && k == "slow_log_time":
		ms, err := strconv.Atoi(val)
		if err != nil {
			return Result{}, mysql.NewError(mysql.ErWrongArguments, "slow_log_time is a number of milliseconds, not %q", val)
		}
		next.SlowLogTime = ms
	case k == "black_sql" || k == "blacklist_sql_file":
		return Result{}, mysql.NewError(mysql.ErNotSupported, "the statement blacklist is read from blacklist_sql_file: edit the file and reload (SIGHUP or POST /admin/reload)")
	default:
		return Result{}, mysql.NewError(mysql.ErWrongArguments, "unknown admin server command (%s, %s): use ('show', 'proxy'|'node'|'schema', 'config'), ('add'|'del', 'allow_ip', ...) or ('change', 'slow_log_time', ...)", opt, k)
	}
	if err := c.env.Reload(&next); err != nil {
		return Result{}, mysql.NewError(mysql.ErWrongArguments, "%v", err)
	}
	return Result{Affected: 1}, nil
}

// adminDigest shows or resets the query digest.
func (c *Console) adminDigest(v []string) (Result, error) {
	d := c.env.Metrics.Digest()
	if d == nil {
		return Result{}, mysql.NewError(mysql.ErNotSupported, "the query digest is off (digest_size: 0)")
	}
	switch strings.ToLower(v[0]) {
	case "show":
		return Result{Columns: digestColumns(), Rows: digestRows(d.Snapshot())}, nil
	case "reset":
		d.Reset()
		return Result{}, nil
	}
	return Result{}, mysql.NewError(mysql.ErWrongArguments, "admin digest(opt) values('reset'), or show shardgate digest")
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
