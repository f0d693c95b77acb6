package clients_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The Go client of the matrix runs in the test process: go-sql-driver through database/sql, with
// interpolateParams=false (COM_STMT_PREPARE, the binary protocol and COM_STMT_CLOSE for every statement with
// arguments) and interpolateParams=true (the driver writes the arguments into a COM_QUERY).

const goCols = "id, name, qty, price, flag, created, note"

// goCase is one case of the Go client: it checks its own expectations and returns what it observed.
type goCase struct {
	name   string
	offset int64
	run    func(ctx context.Context, db *sql.DB, table string, base int64) (observed string, err error)
}

var goCases = []goCase{
	{"crud", 1000, goCRUD},
	{"commit", 2000, goCommit},
	{"rollback", 3000, goRollback},
	{"batch", 4000, goBatch},
	{"genkeys", 5000, goGenkeys},
	{"metadata", 6000, goMetadata},
}

func runGo(ctx context.Context, tg target, base map[string]int64) ([]result, error) {
	var out []result
	for _, variant := range []string{"go-prepared", "go-interpolate"} {
		b, ok := base[variant]
		if !ok {
			continue
		}
		interpolate := variant == "go-interpolate"
		dsn := fmt.Sprintf("%s:%s@tcp(%s)/%s?interpolateParams=%t&timeout=10s&readTimeout=20s&writeTimeout=20s",
			tg.user, tg.password, tg.addr(), db, interpolate)
		h, err := sql.Open("mysql", dsn)
		if err != nil {
			return out, err
		}
		for _, table := range tables {
			for _, c := range goCases {
				r := result{Client: variant, Case: c.name, Table: table, OK: true}
				obs, err := c.run(ctx, h, table, b+c.offset)
				r.Observed = obs
				if err != nil {
					r.OK, r.Error, r.Observed = false, err.Error(), ""
				}
				out = append(out, r)
			}
		}
		h.Close()
	}
	return out, nil
}

func goInsertSQL(table string, rows int) string {
	return "INSERT INTO " + table + " (" + goCols + ") VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", rows), ", ")
}

// goRow are the seven column values of one row, id first.
func goRow(id int64, name string, qty int) []any {
	return []any{id, name, qty, "12.50", true, "2024-01-02 03:04:05", nil}
}

// wantAffected runs a statement and checks the affected rows it reports.
func wantAffected(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, want int64, q string, args ...any) error {
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("%s: %d rows affected, want %d", q, n, want)
	}
	return nil
}

func goCount(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, table string, lo, hi int64) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE id BETWEEN ? AND ?", lo, hi).Scan(&n)
	return n, err
}

func goCRUD(ctx context.Context, db *sql.DB, table string, base int64) (string, error) {
	id := base + 1
	if err := wantAffected(ctx, db, 1, goInsertSQL(table, 1), goRow(id, "alpha", 1)...); err != nil {
		return "", err
	}
	vals := make([]any, 7)
	ptrs := make([]any, 7)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := db.QueryRowContext(ctx, "SELECT "+goCols+" FROM "+table+" WHERE id = ?", id).Scan(ptrs...); err != nil {
		return "", fmt.Errorf("reading row %d back: %w", id, err)
	}
	var got, types []string
	for _, v := range vals {
		types = append(types, fmt.Sprintf("%T", v))
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		got = append(got, fmt.Sprint(v))
	}
	if want := fmt.Sprintf("%d alpha 1 12.50 1 2024-01-02 03:04:05 <nil>", id); strings.Join(got, " ") != want {
		return "", fmt.Errorf("read back %q, want %q", strings.Join(got, " "), want)
	}
	upd := "UPDATE " + table + " SET qty = ? WHERE id = ?"
	if err := wantAffected(ctx, db, 1, upd, 2, id); err != nil {
		return "", err
	}
	if err := wantAffected(ctx, db, 0, upd, 2, id); err != nil { // changed rows, not matched rows
		return "", err
	}
	if err := wantAffected(ctx, db, 1, "DELETE FROM "+table+" WHERE id = ?", id); err != nil {
		return "", err
	}
	var x int64
	if err := db.QueryRowContext(ctx, "SELECT id FROM "+table+" WHERE id = ?", id).Scan(&x); !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("after delete: got %v, want no rows", err)
	}
	return strings.Join(types, " "), nil
}

// goTxn inserts two rows in a transaction, checks that the transaction sees them, and ends it with commit or
// rollback; then it counts the rows on another connection.
func goTxn(ctx context.Context, db *sql.DB, table string, base int64, commit bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for i := int64(1); i <= 2; i++ {
		if err := wantAffected(ctx, tx, 1, goInsertSQL(table, 1), goRow(base+i, fmt.Sprint("t", i), int(i))...); err != nil {
			return err
		}
	}
	if n, err := goCount(ctx, tx, table, base+1, base+2); err != nil || n != 2 {
		return fmt.Errorf("inside the transaction: %d rows (%v), want 2", n, err)
	}
	want := int64(2)
	if commit {
		err = tx.Commit()
	} else {
		err, want = tx.Rollback(), 0
	}
	if err != nil {
		return err
	}
	if n, err := goCount(ctx, db, table, base+1, base+2); err != nil || n != want {
		return fmt.Errorf("after the transaction: %d rows (%v), want %d", n, err, want)
	}
	return nil
}

func goCommit(ctx context.Context, db *sql.DB, table string, base int64) (string, error) {
	return "", goTxn(ctx, db, table, base, true)
}

func goRollback(ctx context.Context, db *sql.DB, table string, base int64) (string, error) {
	return "", goTxn(ctx, db, table, base, false)
}

// goBatch is a multi-row INSERT with placeholders: database/sql has no batch API, and this is what Go
// programs write instead.
func goBatch(ctx context.Context, db *sql.DB, table string, base int64) (string, error) {
	var args []any
	for i := int64(1); i <= 10; i++ {
		args = append(args, goRow(base+i, fmt.Sprint("b", i), int(i))...)
	}
	if err := wantAffected(ctx, db, 10, goInsertSQL(table, 10), args...); err != nil {
		return "", err
	}
	var n, sum int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*), SUM(qty) FROM "+table+" WHERE id BETWEEN ? AND ?", base+1, base+10).
		Scan(&n, &sum)
	if err != nil || n != 10 || sum != 55 {
		return "", fmt.Errorf("count, sum = %d, %d (%v); want 10, 55", n, sum, err)
	}
	return "", nil
}

func goGenkeys(ctx context.Context, db *sql.DB, table string, base int64) (string, error) {
	var ids []int64
	for _, s := range []string{"a", "b"} {
		res, err := db.ExecContext(ctx, "INSERT INTO "+table+" (name, qty, price, flag, created, note) VALUES (?, ?, ?, ?, ?, ?)",
			fmt.Sprint("g", base, s), 1, "12.50", true, "2024-01-02 03:04:05", nil)
		if err != nil {
			return "", err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return "", err
		}
		ids = append(ids, id)
	}
	if ids[0] <= 0 || ids[1] <= 0 || ids[0] == ids[1] {
		return "", fmt.Errorf("generated keys %v", ids)
	}
	for i, id := range ids {
		var name string
		if err := db.QueryRowContext(ctx, "SELECT name FROM "+table+" WHERE id = ?", id).Scan(&name); err != nil {
			return "", fmt.Errorf("row for generated key %d: %w", id, err)
		}
		if want := fmt.Sprint("g", base, "ab"[i:i+1]); name != want {
			return "", fmt.Errorf("row %d is %q, want %q", id, name, want)
		}
	}
	return "", nil
}

func goMetadata(ctx context.Context, db *sql.DB, table string, base int64) (string, error) {
	if err := wantAffected(ctx, db, 1, goInsertSQL(table, 1), goRow(base+1, "meta", 1)...); err != nil {
		return "", err
	}
	rows, err := db.QueryContext(ctx, "SELECT "+goCols+" FROM "+table+" WHERE id = ?", base+1)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return "", err
	}
	var names, desc []string
	for _, ct := range cts {
		names = append(names, ct.Name())
		null, _ := ct.Nullable()
		prec, scale, _ := ct.DecimalSize()
		length, _ := ct.Length()
		desc = append(desc, fmt.Sprintf("%s %s nullable=%t decimal=%d,%d length=%d scan=%s",
			ct.Name(), ct.DatabaseTypeName(), null, prec, scale, length, ct.ScanType()))
	}
	if strings.Join(names, ", ") != goCols {
		return "", fmt.Errorf("columns %q, want %q", names, goCols)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil || n != 1 {
		return "", fmt.Errorf("%d rows (%v), want 1", n, err)
	}
	return strings.Join(desc, "; "), nil
}
