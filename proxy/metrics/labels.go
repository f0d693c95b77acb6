package metrics

import "github.com/shardgate/shardgate/router"

// Statement kinds and routes, the labels of shardgate_statements_total.
var (
	stmtKinds = [...]string{"select", "insert", "update", "delete", "replace", "load", "set", "transaction", "show", "ddl", "call", "other"}
	// Routes: single (one shard or node), scatter (several targets, results
	// concatenated or summed), merge (several targets merged: ORDER BY,
	// GROUP BY, aggregates, DISTINCT, SHOW TABLES), fallback (the exact
	// fallback through temporary tables), unsharded (no sharded table),
	// proxy (answered by the proxy: transaction control, SET, USE, ...).
	stmtRoutes = [...]string{"single", "scatter", "merge", "fallback", "unsharded", "proxy"}
)

const (
	routeSingle = iota
	routeScatter
	routeMerge
	routeFallback
	routeUnsharded
	routeProxy
)

// kindIndex maps a statement's first keyword to its kind.
func kindIndex(keyword string) int {
	switch keyword {
	case "SELECT", "WITH", "VALUES", "TABLE":
		return 0
	case "INSERT":
		return 1
	case "UPDATE":
		return 2
	case "DELETE":
		return 3
	case "REPLACE":
		return 4
	case "LOAD":
		return 5
	case "SET":
		return 6
	case "BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA":
		return 7
	case "SHOW", "DESC", "DESCRIBE", "EXPLAIN":
		return 8
	case "CREATE", "ALTER", "DROP", "TRUNCATE", "RENAME":
		return 9
	case "CALL":
		return 10
	}
	return 11
}

// routeIndex says how a plan ran.
func routeIndex(p *router.Plan) int {
	if p == nil {
		return routeProxy
	}
	switch p.Kind {
	case router.Forward:
		if len(p.Tables) == 0 {
			return routeUnsharded
		}
		return routeSingle
	case router.Concat:
		if p.Merge != nil {
			return routeMerge
		}
		if len(p.Targets) == 1 {
			return routeSingle
		}
		return routeScatter
	case router.ShowTables, router.ShowTableStatus:
		return routeMerge
	case router.Fallback:
		return routeFallback
	case router.Explain:
		return routeProxy
	}
	if len(p.Targets) == 1 {
		return routeSingle
	}
	return routeScatter
}
