package server_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/config"
)

// Order entry through the proxy with go-sql-driver's defaults: every
// statement with arguments is a server-side prepared statement (no
// interpolateParams), so this is the binary protocol end to end.
//
// customers is hash sharded on id, orders and order_lines on customer_id
// with the same rule (co-located: a customer's rows of all three live in
// the same subtable index on the same node), items is a global table (a
// copy on every node; writes go to all). Workers create customers and
// place orders in transactions (insert the order and its lines, take the
// stock from items on every node, add to the customer's balance), roll
// some back on purpose and some after a duplicate key, read orders back
// with joins on the shard key, and have statements cancelled by context
// deadlines. At the end the totals the workers recorded must be what the
// proxy answers and what the subtables on each server hold.

const (
	oeDB        = "sg_orderentry"
	oeWorkers   = 4
	oeCustomers = 3 // per worker
	oeOrders    = 8 // per worker
	oeItems     = 6
	oeStock     = 100000
)

// oeRules shards the order-entry tables over two nodes, two subtables
// each.
func oeRules() []config.ShardRule {
	nodes := []string{"node1", "node2"}
	return []config.ShardRule{
		{DB: oeDB, Table: "customers", Key: "id", Type: "hash", Nodes: nodes, Locations: []int{2, 2}},
		{DB: oeDB, Table: "orders", Key: "customer_id", Type: "hash", Nodes: nodes, Locations: []int{2, 2}},
		{DB: oeDB, Table: "order_lines", Key: "customer_id", Type: "hash", Nodes: nodes, Locations: []int{2, 2}},
		{DB: oeDB, Table: "items", Type: "global", Nodes: nodes},
	}
}

// oeTally is what the workers committed, per customer and per item.
type oeTally struct {
	mu      sync.Mutex
	orders  map[int64]int   // customer -> committed orders
	lines   map[int64]int   // customer -> committed lines
	cents   map[int64]int64 // customer -> sum of order totals, in cents
	taken   map[int]int     // item -> units taken from stock
	gone    []int64         // orders rolled back: must not exist
	retries int             // transactions retried after a deadlock or lock wait timeout
}

func (tl *oeTally) commit(cust int64, lines []oeLine, cents int64) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.orders[cust]++
	tl.lines[cust] += len(lines)
	tl.cents[cust] += cents
	for _, l := range lines {
		tl.taken[l.item] += l.qty
	}
}

type oeLine struct {
	item, qty int
	cents     int64 // unit price
}

func oeMoney(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// TestOrderEntry runs the order-entry workload; see above.
func TestOrderEntry(t *testing.T) {
	servers := backends(t)[:2]
	for _, s := range servers {
		if err := dropDirect(s, oeDB); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if err := dropDirect(s, oeDB); err != nil {
				t.Error(err)
			}
		}
	})
	cfg := newConfig(t, servers...)
	for i := range cfg.Nodes {
		// A transaction pins a connection on each node it reaches and
		// cancelled sleeps hold theirs until they end: room for all.
		cfg.Nodes[i].MaxConnsLimit = 16
	}
	cfg.Schemas[0].Shard = oeRules()
	p := startProxy(t, cfg)
	root := openDB(t, p.dsn("", ""))
	mustExec(t, root, "CREATE DATABASE "+oeDB)
	root.Close()
	// go-sql-driver defaults; a short lock wait so that a cross-node
	// wait cycle (InnoDB sees only its own node) ends in an error the
	// worker retries rather than in a hung test.
	db := openDB(t, p.dsn(oeDB, "innodb_lock_wait_timeout=3"))
	db.SetMaxOpenConns(oeWorkers + 2)
	mustExec(t, db,
		"CREATE TABLE customers (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL, balance DECIMAL(12,2) NOT NULL DEFAULT 0)",
		"CREATE TABLE orders (id BIGINT NOT NULL, customer_id BIGINT NOT NULL, total DECIMAL(12,2) NOT NULL, status VARCHAR(10) NOT NULL, created DATETIME NOT NULL, PRIMARY KEY (customer_id, id))",
		"CREATE TABLE order_lines (order_id BIGINT NOT NULL, customer_id BIGINT NOT NULL, line INT NOT NULL, item_id INT NOT NULL, qty INT NOT NULL, price DECIMAL(10,2) NOT NULL, PRIMARY KEY (customer_id, order_id, line))",
		"CREATE TABLE items (id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(10,2) NOT NULL, stock INT NOT NULL)",
	)
	ctx := t.Context()
	for i := 1; i <= oeItems; i++ {
		if _, err := db.ExecContext(ctx, "INSERT INTO items (id, name, price, stock) VALUES (?, ?, ?, ?)",
			i, fmt.Sprintf("item %d", i), oeMoney(int64(i*125+99)), oeStock); err != nil {
			t.Fatal(err)
		}
	}

	tl := &oeTally{orders: map[int64]int{}, lines: map[int64]int{}, cents: map[int64]int64{}, taken: map[int]int{}}
	errs := make(chan error, oeWorkers+1)
	var wg sync.WaitGroup
	for w := range oeWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := oeWorker(ctx, db, w, tl); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := oeCanceller(ctx, db, tl); err != nil {
			errs <- fmt.Errorf("canceller: %w", err)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d customers, %d orders committed, %d rolled back, %d retries", len(tl.orders), oeSum(tl.orders), len(tl.gone), tl.retries)
	// The sessions whose clients the deadlines disconnected end when
	// their sleeps do, rolling back what their transactions wrote; the
	// checks below run after that.
	eventually(t, 30*time.Second, "the sessions of cancelled clients to end", func() bool {
		return p.srv.Stats().Sessions == db.Stats().OpenConnections
	})

	var wantOrders, wantLines [][]string
	var custs []int64
	for c := range tl.orders {
		custs = append(custs, c)
	}
	slices.Sort(custs)
	for _, c := range custs {
		wantOrders = append(wantOrders, []string{fmt.Sprint(c), fmt.Sprint(tl.orders[c]), oeMoney(tl.cents[c])})
		wantLines = append(wantLines, []string{fmt.Sprint(c), fmt.Sprint(tl.lines[c])})
	}
	var wantItems [][]string
	for i := 1; i <= oeItems; i++ {
		wantItems = append(wantItems, []string{fmt.Sprint(i), fmt.Sprint(oeStock - tl.taken[i])})
	}

	t.Run("through the proxy", func(t *testing.T) {
		// Cross-shard merges, as prepared statements with bound values.
		check := func(what string, want [][]string, q string, args ...any) {
			t.Helper()
			if got := queryStrings(t, db, q, args...); joinRows(got) != joinRows(want) {
				t.Errorf("%s:\n got  %s\n want %s", what, joinRows(got), joinRows(want))
			}
		}
		check("orders per customer", wantOrders,
			"SELECT customer_id, COUNT(*), SUM(total) FROM orders WHERE customer_id > ? GROUP BY customer_id ORDER BY customer_id", 0)
		check("lines per customer", wantLines,
			"SELECT customer_id, COUNT(*) FROM order_lines WHERE qty > ? GROUP BY customer_id ORDER BY customer_id", 0)
		check("customers joined with their orders", wantOrders,
			"SELECT c.id, COUNT(o.id), c.balance FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.name LIKE ? GROUP BY c.id, c.balance ORDER BY c.id", "customer%")
		check("stock", wantItems, "SELECT id, stock FROM items WHERE id <= ? ORDER BY id", oeItems)
		// Every order's total is the sum of its lines (a join on the
		// shard key per customer, on one subtable).
		for _, c := range custs {
			rows := queryStrings(t, db, `SELECT o.id FROM orders o JOIN order_lines l ON l.customer_id = o.customer_id AND l.order_id = o.id
				WHERE o.customer_id = ? GROUP BY o.id, o.total HAVING SUM(l.qty * l.price) <> o.total OR COUNT(*) = 0`, c)
			if len(rows) != 0 {
				t.Errorf("customer %d: orders whose lines do not add up to their total: %v", c, rows)
			}
		}
		for _, o := range tl.gone {
			if n := queryValue(t, db, "SELECT COUNT(*) FROM orders WHERE customer_id = ? AND id = ?", o/1000, o); n != "0" {
				t.Errorf("rolled back order %d exists", o)
			}
			if n := queryValue(t, db, "SELECT COUNT(*) FROM order_lines WHERE customer_id = ? AND order_id = ?", o/1000, o); n != "0" {
				t.Errorf("rolled back order %d has lines", o)
			}
		}
	})

	t.Run("on the servers", func(t *testing.T) {
		gotOrders := map[string][]string{}
		gotLines := map[string][]string{}
		for n, s := range servers {
			direct := openDB(t, directDSN(s, oeDB, ""))
			for sub := 2 * n; sub < 2*n+2; sub++ {
				for _, r := range queryStrings(t, direct, fmt.Sprintf("SELECT customer_id, COUNT(*), SUM(total) FROM orders_%04d GROUP BY customer_id", sub)) {
					oeWantSubtable(t, r[0], sub, "orders")
					gotOrders[r[0]] = r
				}
				for _, r := range queryStrings(t, direct, fmt.Sprintf("SELECT customer_id, COUNT(*) FROM order_lines_%04d GROUP BY customer_id", sub)) {
					oeWantSubtable(t, r[0], sub, "order_lines")
					gotLines[r[0]] = r
				}
				for _, r := range queryStrings(t, direct, fmt.Sprintf("SELECT id, balance FROM customers_%04d", sub)) {
					oeWantSubtable(t, r[0], sub, "customers")
				}
			}
			if got := queryStrings(t, direct, "SELECT id, stock FROM items ORDER BY id"); joinRows(got) != joinRows(wantItems) {
				t.Errorf("items on node%d: %s, want %s", n+1, joinRows(got), joinRows(wantItems))
			}
		}
		var orders, lines [][]string
		for _, c := range custs {
			orders = append(orders, gotOrders[fmt.Sprint(c)])
			lines = append(lines, gotLines[fmt.Sprint(c)])
		}
		if joinRows(orders) != joinRows(wantOrders) {
			t.Errorf("orders in the subtables:\n got  %s\n want %s", joinRows(orders), joinRows(wantOrders))
		}
		if joinRows(lines) != joinRows(wantLines) {
			t.Errorf("order lines in the subtables:\n got  %s\n want %s", joinRows(lines), joinRows(wantLines))
		}
		if len(gotOrders) != len(custs) || len(gotLines) != len(custs) {
			t.Errorf("subtables hold orders of %d and lines of %d customers, want %d", len(gotOrders), len(gotLines), len(custs))
		}
	})

	// Once the clients are gone, every backend connection is back in its
	// pool: none leaked by the cancelled statements (whose sessions end
	// when their sleeps do) or by the transactions. (While a client
	// connection lives it may hold one per node: a statement prepared on
	// a global or unsharded table is the backend's, so the session pins
	// that connection for good.)
	db.Close()
	eventually(t, 30*time.Second, "the client sessions to end", func() bool { return p.srv.Stats().Sessions == 0 })
	p.waitPoolIdle(t, 10*time.Second)
}

func oeSum(m map[int64]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// oeWantSubtable checks that a row keyed by customer id is in the subtable
// the hash rule puts it in: id mod 4.
func oeWantSubtable(t *testing.T, id string, sub int, table string) {
	t.Helper()
	var c int64
	if _, err := fmt.Sscan(id, &c); err != nil {
		t.Fatal(err)
	}
	if int(c%4) != sub {
		t.Errorf("%s of customer %d found in subtable %d, want %d", table, c, sub, c%4)
	}
}

// oeWorker creates its customers and places its orders. Customer ids are
// 100*(w+1)+i, order ids customer*1000+n, so ids never collide between
// workers and an order's customer is its id / 1000.
func oeWorker(ctx context.Context, db *sql.DB, w int, tl *oeTally) error {
	var custs []int64
	for i := range oeCustomers {
		c := int64(100*(w+1) + i)
		if _, err := db.ExecContext(ctx, "INSERT INTO customers (id, name) VALUES (?, ?)", c, fmt.Sprintf("customer %d", c)); err != nil {
			return fmt.Errorf("create customer %d: %w", c, err)
		}
		custs = append(custs, c)
	}
	for n := range oeOrders {
		c := custs[n%len(custs)]
		id := c*1000 + int64(n)
		var lines []oeLine
		for l := range 1 + (n+w)%3 {
			item := 1 + (w+n+2*l)%oeItems
			if slices.ContainsFunc(lines, func(x oeLine) bool { return x.item == item }) {
				continue
			}
			lines = append(lines, oeLine{item: item, qty: 1 + (n*7+l)%5})
		}
		// Items in id order: every transaction locks item rows in the
		// same order on each node.
		slices.SortFunc(lines, func(a, b oeLine) int { return a.item - b.item })
		mode := "commit"
		switch {
		case n%4 == 3:
			mode = "rollback"
		case n == 5:
			mode = "duplicate"
		}
		for attempt := 0; ; attempt++ {
			err := oePlaceOrder(ctx, db, c, id, lines, mode, tl)
			var me *gomysql.MySQLError
			if err != nil && errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) && attempt < 5 {
				tl.mu.Lock()
				tl.retries++
				tl.mu.Unlock()
				continue
			}
			if err != nil {
				return fmt.Errorf("order %d (%s): %w", id, mode, err)
			}
			break
		}
		// Read the customer's orders back with a join on the shard key.
		rows, err := db.QueryContext(ctx, `SELECT o.id, o.status, COUNT(l.line), SUM(l.qty) FROM orders o
			JOIN order_lines l ON l.customer_id = o.customer_id AND l.order_id = o.id
			WHERE o.customer_id = ? GROUP BY o.id, o.status ORDER BY o.id`, c)
		if err != nil {
			return fmt.Errorf("read back customer %d: %w", c, err)
		}
		got, err := scanStrings(rows)
		if err != nil {
			return fmt.Errorf("read back customer %d: %w", c, err)
		}
		found := false
		for _, r := range got {
			if r[0] == fmt.Sprint(id) {
				found = true
				if r[1] != "placed" || r[2] != fmt.Sprint(len(lines)) {
					return fmt.Errorf("order %d read back as %v, want placed with %d lines", id, r, len(lines))
				}
			}
		}
		if found != (mode == "commit") {
			return fmt.Errorf("order %d (%s): found after the transaction: %v (customer's orders %v)", id, mode, found, got)
		}
	}
	return nil
}

// oePlaceOrder runs one order's transaction: commit it, roll it back, or
// fail it with a duplicate line and roll back.
func oePlaceOrder(ctx context.Context, db *sql.DB, c, id int64, lines []oeLine, mode string, tl *oeTally) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = fmt.Errorf("%w; rollback: %v", err, rerr)
			}
		}
	}()
	price, err := tx.PrepareContext(ctx, "SELECT price FROM items WHERE id = ?")
	if err != nil {
		return err
	}
	defer price.Close()
	insLine, err := tx.PrepareContext(ctx, "INSERT INTO order_lines (order_id, customer_id, line, item_id, qty, price) VALUES (?, ?, ?, ?, ?, ?)")
	if err != nil {
		return err
	}
	defer insLine.Close()
	take, err := tx.PrepareContext(ctx, "UPDATE items SET stock = stock - ? WHERE id = ? AND stock >= ?")
	if err != nil {
		return err
	}
	defer take.Close()

	var total int64
	for i := range lines {
		var p string
		if err := price.QueryRowContext(ctx, lines[i].item).Scan(&p); err != nil {
			return fmt.Errorf("price of item %d: %w", lines[i].item, err)
		}
		var units, cents int64
		if _, err := fmt.Sscanf(p, "%d.%d", &units, &cents); err != nil {
			return fmt.Errorf("price %q: %w", p, err)
		}
		lines[i].cents = units*100 + cents
		total += lines[i].cents * int64(lines[i].qty)
	}
	created := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).Add(time.Duration(id%1000) * time.Minute)
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer_id, total, status, created) VALUES (?, ?, ?, ?, ?)",
		id, c, oeMoney(total), "placed", created); err != nil {
		return fmt.Errorf("insert order: %w", err)
	}
	for i, l := range lines {
		if _, err := insLine.ExecContext(ctx, id, c, i+1, l.item, l.qty, oeMoney(l.cents)); err != nil {
			return fmt.Errorf("insert line %d: %w", i+1, err)
		}
		// A global table: the update runs on every node.
		res, err := take.ExecContext(ctx, l.qty, l.item, l.qty)
		if err != nil {
			return fmt.Errorf("take item %d: %w", l.item, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("take item %d: %d rows affected, %v; want 1 (one copy's count)", l.item, n, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE customers SET balance = balance + ? WHERE id = ?", oeMoney(total), c); err != nil {
		return fmt.Errorf("update balance: %w", err)
	}
	// Inside the transaction its own writes are visible.
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM order_lines WHERE customer_id = ? AND order_id = ?", c, id).Scan(&n); err != nil {
		return fmt.Errorf("count own lines: %w", err)
	}
	if n != len(lines) {
		return fmt.Errorf("the transaction sees %d of its %d lines", n, len(lines))
	}
	switch mode {
	case "rollback":
		if err := tx.Rollback(); err != nil {
			return err
		}
		tl.mu.Lock()
		tl.gone = append(tl.gone, id)
		tl.mu.Unlock()
		return nil
	case "duplicate":
		_, err := insLine.ExecContext(ctx, id, c, 1, lines[0].item, 1, oeMoney(lines[0].cents))
		var me *gomysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1062 {
			return fmt.Errorf("duplicate order line: got %v, want error 1062", err)
		}
		if err := tx.Rollback(); err != nil {
			return err
		}
		tl.mu.Lock()
		tl.gone = append(tl.gone, id)
		tl.mu.Unlock()
		return nil
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	tl.commit(c, lines, total)
	return nil
}

// oeCanceller runs statements whose context deadline passes while they
// sleep on a backend (a prepared statement on a sharded table, on one
// subtable and across shards, and one on an unsharded statement), and
// checks after each that the pool still serves queries at once.
func oeCanceller(ctx context.Context, db *sql.DB, tl *oeTally) error {
	// A transaction whose context ends while it sleeps: the driver drops
	// the connection, and what the transaction wrote must be rolled back
	// on every node it reached (an order on node1, stock on both).
	for i, c := range []int64{100, 102} {
		id := c*1000 + 900 + int64(i)
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := func() error {
			tx, err := db.BeginTx(cctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(cctx, "INSERT INTO orders (id, customer_id, total, status, created) VALUES (?, ?, ?, ?, ?)",
				id, c, "1.00", "placed", time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)); err != nil {
				return fmt.Errorf("insert order %d: %w", id, err)
			}
			if _, err := tx.ExecContext(cctx, "UPDATE items SET stock = stock - ? WHERE id = ?", 1000, 1+i); err != nil {
				return fmt.Errorf("take stock: %w", err)
			}
			rows, err := tx.QueryContext(cctx, "SELECT SLEEP(?) FROM orders WHERE customer_id = ? AND id = ?", 3, c, id)
			if err == nil {
				_, err = scanStrings(rows)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("sleep in the transaction: got %v, want the context deadline", err)
			}
			return nil
		}()
		cancel()
		if err != nil {
			return err
		}
		tl.mu.Lock()
		tl.gone = append(tl.gone, id)
		tl.mu.Unlock()
	}

	stmts := []struct {
		q    string
		args []any
	}{
		{"SELECT SLEEP(?) FROM items WHERE id = ?", []any{3, 1}},
		{"SELECT SLEEP(?), id FROM customers WHERE id = ?", []any{3, 100}},
		{"SELECT SLEEP(?)", []any{3}},
		{"SELECT id, SLEEP(?) FROM customers WHERE id IN (?, ?) ORDER BY id", []any{3, 100, 101}},
	}
	for round := range 2 {
		for _, s := range stmts {
			cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			start := time.Now()
			rows, err := db.QueryContext(cctx, s.q, s.args...)
			var got [][]string
			if err == nil {
				got, err = scanStrings(rows)
			}
			cancel()
			if err == nil {
				if len(got) == 0 {
					continue // the worker has not created the customers yet: nothing slept
				}
				return fmt.Errorf("%s (round %d): finished despite its 150ms deadline: %v", s.q, round, got)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%s: got %v, want the context deadline", s.q, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				return fmt.Errorf("%s: cancelled after %v", s.q, d)
			}
			// The pool serves the next statement at once.
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			var n int
			err = db.QueryRowContext(qctx, "SELECT COUNT(*) FROM items WHERE stock > ?", 0).Scan(&n)
			qcancel()
			if err != nil || n != oeItems {
				return fmt.Errorf("after cancelling %s: COUNT(*) = %d, %v; want %d", s.q, n, err, oeItems)
			}
		}
	}
	return nil
}
