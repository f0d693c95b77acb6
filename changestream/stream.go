package changestream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/router"
)

// Change is one row changed by a committed transaction.
type Change struct {
	Node     string `json:"node"`
	Table    string `json:"table"`    // logical db.table
	Subtable string `json:"subtable"` // physical db.table on Node
	Op       string `json:"op"`       // insert, update, delete, or ddl (Options.DDL)
	// Before and After are the row images: column name -> value, one Go
	// type per kind of column (values.go; Decimal, Enum, Set, []byte for
	// binary strings, UTF-8 string for text in any character set).
	Before map[string]any `json:"before,omitempty"`
	After  map[string]any `json:"after,omitempty"`
	// Types names each column's MariaDB type as the binary log describes
	// it ("int unsigned", "decimal(30,10)", "varbinary", "blob",
	// "binary(16)", "varchar latin1", "enum", "datetime(6)", "geometry"),
	// so a consumer knows which strings are base64 (docs/change-streams.md
	// lists them). Shared by the changes of one table map: read only.
	Types map[string]string `json:"types,omitempty"`
	// Key names the table's primary-key columns, in the key's order, as
	// the table map's optional metadata gives them
	// (binlog_row_metadata=FULL); nil when the table has none. Shared by
	// the changes of one table map: read only.
	Key  []string `json:"key,omitempty"`
	GTID string   `json:"gtid"` // the transaction's, domain-server-seq
	Seq  int      `json:"seq"`  // the row's place in its transaction, from 0
	// Last marks the transaction's last row (of the tables streamed):
	// the transaction is complete once it has arrived.
	Last bool  `json:"last,omitempty"`
	Time int64 `json:"ts"` // the transaction's binary log timestamp (Unix seconds)
	// Pos is the node's GTID position before this transaction: resume
	// from it to receive the transaction again.
	Pos string `json:"pos"`
	// Query is the statement of a ddl change as the binary log has it,
	// and Schema the database it ran in (its default database), which
	// names the tables the statement does not qualify. Table and
	// Subtable name the streamed table it changes, or are empty when the
	// statement did not parse (or is a DROP DATABASE in a stream of every
	// table): the reader does not guess which tables it changed.
	Query  string `json:"query,omitempty"`
	Schema string `json:"schema,omitempty"`
	// JSON is the change encoded as one JSON line (with its newline),
	// set when Options.Encode asks for it: each node's reader encodes its
	// own changes, in parallel with the others.
	JSON []byte `json:"-"`
	// Columns are the table's columns in its order, with their types and
	// nullability (columns.go); not part of the JSON line. Shared by the
	// changes of one table map: read only.
	Columns []Column `json:"-"`

	// typesJSON is Types encoded, once per table map (tableCols).
	typesJSON json.RawMessage
}

// changeJSON is Change without its methods, for marshal.
type changeJSON Change

// marshal encodes ch as JSON, with its types as encoded once per table
// map instead of once per change (encoding/json sorts a map's keys each
// time).
func (ch *Change) marshal() ([]byte, error) {
	if ch.typesJSON == nil {
		return json.Marshal((*changeJSON)(ch))
	}
	return json.Marshal(struct {
		*changeJSON
		Types json.RawMessage `json:"types,omitempty"`
	}{(*changeJSON)(ch), ch.typesJSON})
}

// Source is one node's master, where its binary log is read.
type Source struct {
	Node, Addr, User, Password string
}

// Sources lists the nodes of cfg as sources.
func Sources(cfg *config.Config) []Source {
	out := make([]Source, 0, len(cfg.Nodes))
	for _, n := range cfg.Nodes {
		out = append(out, Source{Node: n.Name, Addr: n.Master, User: n.User, Password: n.Password})
	}
	return out
}

// Names maps physical tables (db.table) to logical ones, from the shard
// rules of cfg: a rule's subtables table_0000, table_0001, ... and a
// global table's copies are its logical table; any other table is itself.
func Names(cfg *config.Config) func(db, table string) string {
	m := map[string]string{}
	var periods []string // db.table_ prefixes of date rules, whose subtables are named by period
	for _, sc := range cfg.Schemas {
		for _, r := range sc.Shard {
			logical := r.DB + "." + r.Table
			m[logical] = logical
			switch r.Type {
			case "date_year", "date_month", "date_day":
				periods = append(periods, logical+"_")
				continue
			}
			n := 0
			for _, l := range r.Locations {
				n += l
			}
			for i := 0; i < n; i++ {
				m[r.DB+"."+r.Subtable(i)] = logical
			}
		}
	}
	return func(db, table string) string {
		key := db + "." + table
		if l, ok := m[key]; ok {
			return l
		}
		for _, p := range periods {
			if rest, ok := strings.CutPrefix(key, p); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
				return strings.TrimSuffix(p, "_")
			}
		}
		return key
	}
}

// NamesWith is Names with the subtables of more rules named by their
// logical tables as well. For a table that online resharding moves
// (package move), pass the workflow's old and new rules (Spec.From and
// Spec.To, from Manager.List): the application's writes reach the old
// subtables before the cutover and the new ones after it, and both stream
// as the logical table; the workflow's own writes to either (the copy,
// the apply, the reverse stream) are flagged and left out (Options.KeepFlagged).
func NamesWith(cfg *config.Config, rules ...config.ShardRule) func(db, table string) string {
	schemas := append(slices.Clone(cfg.Schemas), config.Schema{Shard: rules})
	return Names(&config.Config{Schemas: schemas})
}

// Check verifies that src writes binary logs a stream can read.
func Check(src Source) error {
	c, err := client.Connect(src.Addr, src.User, src.Password, "")
	if err != nil {
		return fmt.Errorf("node %s (%s): %w", src.Node, src.Addr, err)
	}
	defer c.Close()
	r, err := c.Execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata")
	if err != nil {
		return fmt.Errorf("node %s (%s): %w", src.Node, src.Addr, err)
	}
	want := []string{"1", "ROW", "FULL", "FULL"}
	names := []string{"log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata"}
	var bad []string
	for i := range want {
		v, _ := r.GetString(0, i)
		if !strings.EqualFold(v, want[i]) {
			bad = append(bad, fmt.Sprintf("%s is %s, needs %s", names[i], v, want[i]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("node %s (%s) cannot feed a change stream: %s", src.Node, src.Addr, strings.Join(bad, ", "))
	}
	return nil
}

// Options shape a subscription.
type Options struct {
	// Tables are the logical tables (db.table) to stream; empty: all.
	Tables []string
	// From is each node's GTID position to start after (a MariaDB GTID
	// list, as in Change.Pos); a node not named starts at its first
	// binary log.
	From map[string]string
	// Buffer is how many changes may wait for the consumer (default 1024).
	Buffer int
	// ServerID is the replica id the readers present (default: one per
	// subscription, from the clock); it must differ from every server's.
	ServerID uint32
	// Until stops a node's reader once its position contains this GTID
	// position (a node not named reads on until ctx ends); the change
	// channel closes when every reader has stopped.
	Until map[string]string
	// Encode sets each change's JSON.
	Encode bool
	// Marks adds, after every transaction of a node (whether or not it
	// touched a wanted table), a change with Op "mark" whose Pos is the
	// node's position after it: a consumer learns how far it has read even
	// while no wanted table changes (online resharding waits on it).
	Marks bool
	// EnumNumbers encodes ENUM and SET values as their index and bit mask
	// instead of their text (the Go values carry both either way).
	EnumNumbers bool
	// RawText leaves the values of text columns as the bytes they are
	// stored as, in the column's character set (for writing them back
	// with a _binary literal, as online resharding does), instead of
	// decoding them to UTF-8. It cannot be combined with Encode.
	RawText bool
	// DDL adds, for each statement that changes a streamed table
	// (CREATE, ALTER, DROP, TRUNCATE or RENAME of one of its subtables,
	// CREATE or DROP INDEX on one), a change with Op "ddl" carrying the
	// statement (Query, Schema) and the transaction's fields (ddl.go).
	DDL bool
	// KeepFlagged also streams the changes of transactions written with
	// MariaDB's skip_replication=1 (LOG_EVENT_SKIP_REPLICATION_F in their
	// events' headers), which a stream leaves out by default: online
	// resharding writes its copies that way (package move), and they are
	// not changes of the logical table. Their positions are read either
	// way (Marks, Until).
	KeepFlagged bool
	// Statements adds, for each write a transaction logged as a statement
	// rather than as rows (a session that set binlog_format to STATEMENT
	// or MIXED; router.Classify says it writes: not BEGIN, SAVEPOINT or XA
	// END), a change with Op "statement" carrying it (Query, Schema) and
	// no Table: which rows it changed, the binary log does not say.
	Statements bool
}

// Subscribe streams the changes of the sources' binary logs until ctx
// ends or a reader fails; the error channel then gets the reason (nil
// after ctx ended) and the change channel is closed.
func Subscribe(ctx context.Context, sources []Source, names func(db, table string) string, o Options) (<-chan Change, <-chan error, error) {
	if o.Buffer <= 0 {
		o.Buffer = 1024
	}
	if o.RawText && o.Encode {
		return nil, nil, fmt.Errorf("changestream: RawText values cannot be encoded as JSON")
	}
	if o.ServerID == 0 {
		o.ServerID = uint32(1_000_000 + time.Now().UnixNano()%1_000_000_000)
	}
	want := map[string]bool{}
	for _, t := range o.Tables {
		want[t] = true
	}
	for _, src := range sources {
		if err := Check(src); err != nil {
			return nil, nil, err
		}
	}
	out := make(chan Change, o.Buffer)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, len(sources))
	for i, src := range sources {
		r := &reader{src: src, names: names, want: want, out: out, serverID: o.ServerID + uint32(i), encode: o.Encode, marks: o.Marks,
			numbers: o.EnumNumbers, raw: o.RawText, ddl: o.DDL, flagged: o.KeepFlagged, stmts: o.Statements}
		if u, ok := o.Until[src.Node]; ok {
			set, err := gmysql.ParseMariadbGTIDSet(u)
			if err != nil {
				cancel()
				return nil, nil, fmt.Errorf("node %s: until %q: %w", src.Node, u, err)
			}
			r.until = set
		}
		go func() { done <- r.run(ctx, o.From[src.Node]) }()
	}
	go func() {
		var first error
		for range sources {
			if err := <-done; err != nil && first == nil && ctx.Err() == nil {
				first = err
				cancel()
			}
		}
		cancel()
		close(out)
		errc <- first
	}()
	return out, errc, nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// reader follows one node's binary log.
type reader struct {
	src      Source
	names    func(db, table string) string
	want     map[string]bool
	out      chan<- Change
	serverID uint32
	until    gmysql.GTIDSet // nil: no end
	encode   bool
	marks    bool
	numbers  bool // Options.EnumNumbers
	raw      bool // Options.RawText
	ddl      bool // Options.DDL
	flagged  bool // Options.KeepFlagged
	stmts    bool // Options.Statements

	// Owned by run's goroutine: the decoded table maps, the character
	// sets and decoders read so far, and a connection to the source for
	// reading them (opened on first use).
	tables   map[uint64]*tableCols
	charsets map[uint64]string
	decoders map[string]*decoder
	conn     *client.Conn
}

// skipReplication is LOG_EVENT_SKIP_REPLICATION_F, the event header flag
// of events written with skip_replication=1.
const skipReplication = 0x8000

func (r *reader) run(ctx context.Context, from string) error {
	host, portText, err := net.SplitHostPort(r.src.Addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: r.serverID, Flavor: gmysql.MariaDBFlavor, Host: host, Port: uint16(port),
		User: r.src.User, Password: r.src.Password, MaxReconnectAttempts: 3,
		// Decimals exactly (as json.Number), TIMESTAMPs in UTC.
		UseDecimal: true, TimestampStringLocation: time.UTC,
		// The reader reports its own errors; go-mysql's log is noise here.
		Logger: quiet,
	})
	defer syncer.Close()
	defer func() {
		if r.conn != nil {
			r.conn.Close()
		}
	}()
	set, err := gmysql.ParseMariadbGTIDSet(from)
	if err != nil {
		return fmt.Errorf("node %s: position %q: %w", r.src.Node, from, err)
	}
	cur := set.(*gmysql.MariadbGTIDSet)
	if r.until != nil && cur.Contain(r.until) {
		return nil
	}
	streamer, err := syncer.StartSyncGTID(cur.Clone())
	if err != nil {
		return fmt.Errorf("node %s: %w", r.src.Node, err)
	}
	var (
		gtid    *gmysql.MariadbGTID
		before  string // cur before the open transaction
		seq     int
		pending []Change // the open transaction's rows, sent at its commit
		when    int64
		alone   bool // the open GTID is a standalone statement (DDL): no XID ends it
		ddl     bool // the open GTID is standalone or flagged DDL: its statements may change tables
	)
	commit := func() error {
		if gtid == nil {
			return nil
		}
		if err := cur.AddSet(gtid); err != nil {
			return err
		}
		if n := len(pending); n > 0 {
			pending[n-1].Last = true
		}
		for _, ch := range pending {
			if r.encode {
				enc := ch
				if r.numbers {
					enc.Before, enc.After = numeric(ch.Before), numeric(ch.After)
				}
				b, err := enc.marshal()
				if err != nil {
					return fmt.Errorf("node %s: encoding a change of %s: %w", r.src.Node, ch.Table, err)
				}
				ch.JSON = append(b, '\n')
			}
			select {
			case r.out <- ch:
			case <-ctx.Done():
				return nil
			}
		}
		pending, gtid = pending[:0], nil
		if r.marks {
			select {
			case r.out <- Change{Node: r.src.Node, Op: "mark", Pos: cur.String()}:
			case <-ctx.Done():
			}
		}
		return nil
	}
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("node %s: reading the binary log: %w", r.src.Node, err)
		}
		switch e := ev.Event.(type) {
		case *replication.MariadbGTIDEvent:
			g := eventGTID(ev, e)
			gtid, before, seq, pending, when = &g, cur.String(), 0, pending[:0], int64(ev.Header.Timestamp)
			alone, ddl = e.IsStandalone(), e.IsStandalone() || e.IsDDL()
		case *replication.RowsEvent:
			if gtid == nil || ev.Header.Flags&skipReplication != 0 && !r.flagged {
				continue
			}
			var err error
			pending, err = r.rows(e, Change{Node: r.src.Node, GTID: gtid.String(), Time: when, Pos: before}, &seq, pending)
			if err != nil {
				return err
			}
		case *replication.XIDEvent:
			if err := commit(); err != nil {
				return err
			}
			if r.until != nil && cur.Contain(r.until) {
				return nil
			}
		case *replication.QueryEvent:
			q := strings.TrimSpace(string(e.Query))
			if r.ddl && ddl && gtid != nil && (ev.Header.Flags&skipReplication == 0 || r.flagged) {
				pending = r.ddlChanges(e, Change{Node: r.src.Node, GTID: gtid.String(), Time: when, Pos: before}, &seq, pending)
			}
			if r.stmts && !ddl && gtid != nil && router.Classify(q, router.ModeOfBits(sqlMode(e.StatusVars))).Kind == router.KindWrite {
				pending = append(pending, Change{Node: r.src.Node, GTID: gtid.String(), Time: when, Pos: before, Op: "statement",
					Query: string(e.Query), Schema: string(e.Schema), Seq: seq})
				seq++
			}
			if alone || strings.EqualFold(q, "COMMIT") {
				// A standalone statement (DDL), or the COMMIT of a
				// non-transactional engine: the transaction ends here.
				if err := commit(); err != nil {
					return err
				}
				if r.until != nil && cur.Contain(r.until) {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// rows appends the changes of one rows event to pending (base carries the
// transaction's fields; seq numbers the rows of the transaction), unless
// its table is not wanted.
func (r *reader) rows(e *replication.RowsEvent, base Change, seq *int, pending []Change) ([]Change, error) {
	db, table := string(e.Table.Schema), string(e.Table.Table)
	logical := r.names(db, table)
	if len(r.want) > 0 && !r.want[logical] {
		return pending, nil
	}
	tc, err := r.columns(e.Table)
	if err != nil {
		return pending, fmt.Errorf("node %s: %w", r.src.Node, err)
	}
	row := func(vals []any) map[string]any {
		m := make(map[string]any, len(vals))
		for i, v := range vals {
			if i < len(tc.cols) && tc.cols[i].name != "" {
				m[tc.cols[i].name] = tc.cols[i].value(v)
			}
		}
		return m
	}
	base.Table, base.Subtable, base.Types, base.typesJSON, base.Key = logical, db+"."+table, tc.types, tc.typesJSON, tc.key
	base.Columns = tc.columnList()
	add := func(op string, before, after map[string]any) {
		ch := base
		ch.Op, ch.Before, ch.After, ch.Seq = op, before, after, *seq
		*seq++
		pending = append(pending, ch)
	}
	switch e.Type() {
	case replication.EnumRowsEventTypeInsert:
		for _, v := range e.Rows {
			add("insert", nil, row(v))
		}
	case replication.EnumRowsEventTypeDelete:
		for _, v := range e.Rows {
			add("delete", row(v), nil)
		}
	case replication.EnumRowsEventTypeUpdate:
		for i := 0; i+1 < len(e.Rows); i += 2 {
			add("update", row(e.Rows[i]), row(e.Rows[i+1]))
		}
	}
	return pending, nil
}

// ddlChanges appends the ddl changes of one query event to pending: one
// per streamed logical table the statement changes, with the first of its
// subtables the statement names; one with no table when the statement
// does not parse.
func (r *reader) ddlChanges(e *replication.QueryEvent, base Change, seq *int, pending []Change) []Change {
	base.Op, base.Query, base.Schema = "ddl", string(e.Query), string(e.Schema)
	add := func(logical, sub string) {
		ch := base
		ch.Table, ch.Subtable, ch.Seq = logical, sub, *seq
		*seq++
		pending = append(pending, ch)
	}
	tables, dropDB, err := router.ChangedTables(string(e.Query), string(e.Schema), router.ModeOfBits(sqlMode(e.StatusVars)))
	if err != nil {
		add("", "")
		return pending
	}
	seen := map[string]bool{}
	for _, t := range tables {
		logical := r.names(t.DB, t.Name)
		if seen[logical] || len(r.want) > 0 && !r.want[logical] {
			continue
		}
		seen[logical] = true
		add(logical, t.DB+"."+t.Name)
	}
	if dropDB != "" {
		// Only the wanted tables can be named: the binary log does not
		// list what the database held.
		if len(r.want) == 0 {
			add("", "")
		}
		var in []string
		for t := range r.want {
			if db, _, _ := strings.Cut(t, "."); db == dropDB {
				in = append(in, t)
			}
		}
		slices.Sort(in)
		for _, t := range in {
			add(t, "")
		}
	}
	return pending
}

// eventGTID reads a MariaDB GTID event's GTID from the event's own bytes.
// The syncer keeps a pointer to the GTID of the first event it sees for a
// domain and server that its starting position lacks, and moves that
// GTID forward in place as later events arrive, in its own goroutine
// (go-mysql v1.13 MariadbGTIDSet.AddSet): e.GTID may already be a later
// transaction's when the event is read here, and reading it races with
// that write. The raw event is the event's alone.
func eventGTID(ev *replication.BinlogEvent, e *replication.MariadbGTIDEvent) gmysql.MariadbGTID {
	body := ev.RawData
	if len(body) < replication.EventHeaderSize+12 {
		return gmysql.MariadbGTID{DomainID: e.GTID.DomainID, ServerID: ev.Header.ServerID, SequenceNumber: e.GTID.SequenceNumber}
	}
	body = body[replication.EventHeaderSize:]
	return gmysql.MariadbGTID{
		SequenceNumber: binary.LittleEndian.Uint64(body),
		DomainID:       binary.LittleEndian.Uint32(body[8:]),
		ServerID:       ev.Header.ServerID,
	}
}
