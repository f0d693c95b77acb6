package schema

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Column is one column of a table, as information_schema.COLUMNS gives it.
type Column struct {
	Name string // as declared; compare with strings.EqualFold
	// Type is COLUMN_TYPE, for example "int(10) unsigned" or
	// "varchar(64)".
	Type     string
	Nullable bool
	// Default is COLUMN_DEFAULT as MariaDB writes it (a quoted string
	// literal, a number, an expression, or "NULL"); HasDefault is false
	// when the column has none.
	Default    string
	HasDefault bool
	Key        string // COLUMN_KEY: PRI, UNI, MUL or ""
	Extra      string // EXTRA, for example "auto_increment"
}

// DataType is the column's type without its length and attributes, lower
// case ("bigint" for "bigint(20) unsigned"), as information_schema's
// DATA_TYPE.
func (c *Column) DataType() string {
	t, _, _ := strings.Cut(c.Type, "(")
	t, _, _ = strings.Cut(t, " ")
	return strings.ToLower(t)
}

// Generated reports whether the server computes the column (VIRTUAL or
// STORED GENERATED): it is never written.
func (c *Column) Generated() bool {
	return strings.Contains(strings.ToUpper(c.Extra), "GENERATED")
}

// Table is the definition of one logical table at one catalog version.
// A Table is never modified once it is in a Catalog.
type Table struct {
	DB, Name string
	Columns  []Column
	// AutoIncrement is the name of the AUTO_INCREMENT column, or "".
	AutoIncrement string
	// Version is the catalog version this definition was stored at.
	Version uint64
	gone    bool // a drop: the table did not exist from Version on
}

// Column returns the position of the named column (case-insensitive).
func (t *Table) Column(name string) (int, bool) {
	for i := range t.Columns {
		if strings.EqualFold(t.Columns[i].Name, name) {
			return i, true
		}
	}
	return -1, false
}

// Names returns the column names in table order.
func (t *Table) Names() []string {
	out := make([]string, len(t.Columns))
	for i := range t.Columns {
		out[i] = t.Columns[i].Name
	}
	return out
}

// Key identifies a logical table: database and table name, lower case.
type Key struct{ DB, Table string }

// KeyOf returns the key of db.table.
func KeyOf(db, table string) Key { return Key{strings.ToLower(db), strings.ToLower(table)} }

// historyLimit bounds the definitions kept per table for AsOf: a table
// altered more often than this between a reader's version and now is
// answered with the oldest one kept (AsOf reports it).
const historyLimit = 64

// Catalog holds the current definition of every known table and their
// earlier ones. Readers never block: Table and AsOf read an immutable
// snapshot; writers (Put, Drop) copy it.
type Catalog struct {
	mu      sync.Mutex // serializes writers
	version atomic.Uint64
	snap    atomic.Pointer[snapshot]
}

// snapshot is the catalog at one version: per table, its definitions in
// version order, the last one current (nil when the table was dropped).
type snapshot struct {
	tables map[Key][]*Table
}

// NewCatalog returns an empty catalog at version 0.
func NewCatalog() *Catalog {
	c := &Catalog{}
	c.snap.Store(&snapshot{tables: map[Key][]*Table{}})
	return c
}

// Version returns the catalog's current version: the number of changes
// stored so far.
func (c *Catalog) Version() uint64 { return c.version.Load() }

// Table returns the current definition of db.table, or nil when the table
// is unknown or was dropped.
func (c *Catalog) Table(db, table string) *Table {
	h := c.snap.Load().tables[KeyOf(db, table)]
	if len(h) == 0 || h[len(h)-1].gone {
		return nil
	}
	return h[len(h)-1]
}

// AsOf returns the definition of db.table in force at catalog version v:
// the last one stored at or before v. exact is false when that definition
// is no longer kept (the table changed more than historyLimit times since)
// and the oldest one kept is returned instead; t is nil when the table
// did not exist at v.
func (c *Catalog) AsOf(db, table string, v uint64) (t *Table, exact bool) {
	h := c.snap.Load().tables[KeyOf(db, table)]
	i, _ := slices.BinarySearchFunc(h, v+1, func(t *Table, v uint64) int {
		switch {
		case t.Version < v:
			return -1
		case t.Version > v:
			return 1
		}
		return 0
	})
	if i == 0 {
		if len(h) == historyLimit && h[0].Version > v {
			return h[0], false
		}
		return nil, true
	}
	if h[i-1].gone {
		return nil, true
	}
	return h[i-1], true
}

// Put stores t as the current definition of its table, unless it equals
// the current one, and returns the catalog version after it. t must not
// be modified afterwards.
func (c *Catalog) Put(t *Table) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.Table(t.DB, t.Name); cur != nil && Equal(cur, t) {
		return c.version.Load()
	}
	v := c.version.Load() + 1
	t.Version = v
	c.store(KeyOf(t.DB, t.Name), t)
	c.version.Store(v)
	return v
}

// Drop records that db.table no longer exists and returns the version
// after it.
func (c *Catalog) Drop(db, table string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Table(db, table) == nil {
		return c.version.Load()
	}
	v := c.version.Load() + 1
	c.store(KeyOf(db, table), &Table{DB: db, Name: table, Version: v, gone: true})
	c.version.Store(v)
	return v
}

// store appends t to its table's history in a new snapshot. A dropped
// table is stored as a Table marked gone and reads as nil.
func (c *Catalog) store(k Key, t *Table) {
	old := c.snap.Load().tables
	next := make(map[Key][]*Table, len(old)+1)
	for k2, h := range old {
		next[k2] = h
	}
	h := append(slices.Clip(old[k]), t)
	if len(h) > historyLimit {
		h = h[len(h)-historyLimit:]
	}
	next[k] = h
	c.snap.Store(&snapshot{tables: next})
}

// Equal reports whether two definitions have the same columns (name,
// type, nullability, default, key and extra, in the same order).
func Equal(a, b *Table) bool {
	return len(Diff(a, b)) == 0
}

// Diff lists how b's columns differ from a's, one line per difference,
// for drift reports ("column c: type int(11) here, bigint(20) there").
func Diff(a, b *Table) []string {
	var out []string
	n := max(len(a.Columns), len(b.Columns))
	for i := range n {
		switch {
		case i >= len(a.Columns):
			out = append(out, fmt.Sprintf("column %d (%s): only in the second", i+1, b.Columns[i].Name))
			continue
		case i >= len(b.Columns):
			out = append(out, fmt.Sprintf("column %d (%s): only in the first", i+1, a.Columns[i].Name))
			continue
		}
		x, y := a.Columns[i], b.Columns[i]
		if !strings.EqualFold(x.Name, y.Name) {
			out = append(out, fmt.Sprintf("column %d: named %s in the first, %s in the second", i+1, x.Name, y.Name))
			continue
		}
		if x != y {
			out = append(out, fmt.Sprintf("column %s: %s in the first, %s in the second", x.Name, describe(x), describe(y)))
		}
	}
	return out
}

func describe(c Column) string {
	s := c.Type
	if !c.Nullable {
		s += " NOT NULL"
	}
	if c.HasDefault {
		s += " DEFAULT " + c.Default
	}
	if c.Key != "" {
		s += " key " + c.Key
	}
	if c.Extra != "" {
		s += " " + c.Extra
	}
	return s
}

// Members returns the members of an ENUM or SET column in order, as its
// COLUMN_TYPE lists them, quoted, a quote inside a member doubled; nil
// for other types.
func (c *Column) Members() []string {
	dt := c.DataType()
	if dt != "enum" && dt != "set" {
		return nil
	}
	s := c.Type[strings.IndexByte(c.Type, '(')+1:]
	var out []string
	for len(s) > 0 && s[0] == '\'' {
		var b strings.Builder
		i := 1
		for i < len(s) {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i += 2
					continue
				}
				break
			}
			b.WriteByte(s[i])
			i++
		}
		out = append(out, b.String())
		s = strings.TrimLeft(s[min(i+1, len(s)):], ",")
	}
	return out
}
