package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/mysql"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json with the plans the router produces now")

// goldenCase is one entry of a golden file. Cases are written by hand with
// comment, db and sql (and user when not "shard"); -update fills in plan
// or error, which are then reviewed in the diff.
type goldenCase struct {
	Comment string       `json:"comment"`
	User    string       `json:"user,omitempty"`
	DB      string       `json:"db"`
	SQL     string       `json:"sql"`
	Plan    *goldenPlan  `json:"plan,omitempty"`
	Error   *goldenError `json:"error,omitempty"`
}

type goldenPlan struct {
	Kind    string         `json:"kind"`
	Targets []goldenTarget `json:"targets"`
	Renames []goldenRename `json:"renames,omitempty"`
	Tables  []string       `json:"tables,omitempty"`
	Copies  bool           `json:"copies,omitempty"`
	Merge   *Merge         `json:"merge,omitempty"`
	IDFrom  int            `json:"id_target,omitempty"`
	// Generated and FirstID: values of a global sequence in the plan. The
	// golden IDSource hands out 1001, 1002, ... for each case.
	Generated int    `json:"generated,omitempty"`
	FirstID   uint64 `json:"first_id,omitempty"`
	Sticky    bool   `json:"sticky,omitempty"`
	// Into is the INTO @variables clause the caller assigns the merged
	// row to.
	Into      string `json:"into,omitempty"`
	IntoAtEnd bool   `json:"into_at_end,omitempty"`
	// Copies are an exact fallback's copies: "node subtable -> temp: SQL".
	Copied []string `json:"copied,omitempty"`
}

type goldenTarget struct {
	Node     string `json:"node"`
	Subtable string `json:"subtable,omitempty"`
	SQL      string `json:"sql,omitempty"`
}

type goldenRename struct {
	Physical string `json:"physical"`
	Logical  string `json:"logical"`
}

type goldenError struct {
	Code    uint16 `json:"code"`
	State   string `json:"state"`
	Message string `json:"message"`
}

// testRouter builds the router of testdata/ks.yaml without a plan cache:
// golden files record what the planner itself produces.
func testRouter(tb testing.TB) *Router { return newTestRouter(tb, 0) }

// testCachedRouter builds the same router with its plan cache.
func testCachedRouter(tb testing.TB) *Router { return newTestRouter(tb, 4096) }

func newTestRouter(tb testing.TB, cacheSize int) *Router {
	tb.Helper()
	cfg, err := config.Load("testdata/ks.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.PlanCacheSize = cacheSize
	r, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func loadGolden(tb testing.TB) map[string][]goldenCase {
	tb.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files: %v", err)
	}
	out := make(map[string][]goldenCase)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var cases []goldenCase
		if err := json.Unmarshal(data, &cases); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out[f] = cases
	}
	return out
}

func (c *goldenCase) session() Session {
	u := c.User
	if u == "" {
		u = "shard"
	}
	return Session{User: u, DB: c.DB, Catalog: goldenCatalog{}, IDs: &counterIDs{next: 1001}}
}

// goldenCatalog knows the columns of the golden tables that INSERTs
// without a column list use.
type goldenCatalog struct{}

func (goldenCatalog) Columns(db, table string) ([]string, bool) {
	cols, ok := map[string][]string{
		"sbtest.sbtest1": {"id", "k", "c", "pad"},
		"sbtest.seqd":    {"id", "note"},
		"sbtest.tickets": {"id", "user_id", "subject"},
	}[db+"."+table]
	return cols, ok
}

// counterIDs is a sequence in memory: next, next+1, ...; it records the
// tables asked for.
type counterIDs struct {
	next  uint64
	asked []string
}

func (c *counterIDs) NextIDs(db, table string, ids []uint64) error {
	c.asked = append(c.asked, db+"."+table)
	for i := range ids {
		ids[i] = c.next
		c.next++
	}
	return nil
}

// outcome routes c and returns its plan or error in golden form.
func outcome(r *Router, c *goldenCase) (*goldenPlan, *goldenError) {
	p, err := r.Route(c.SQL, c.session())
	if err != nil {
		var se *mysql.SQLError
		if !errors.As(err, &se) {
			return nil, &goldenError{Code: 0, Message: "uncoded error: " + err.Error()}
		}
		return nil, &goldenError{Code: se.Code, State: se.State, Message: se.Message}
	}
	gp := &goldenPlan{Kind: p.Kind.String(), Tables: p.Tables, Copies: p.Copies, Merge: p.Merge, IDFrom: p.IDTarget, Targets: []goldenTarget{},
		Generated: p.Generated, FirstID: p.FirstID, Sticky: p.Sticky, Into: p.Into, IntoAtEnd: p.IntoAtEnd}
	for _, g := range p.Gathers {
		for _, t := range g.Subtables {
			gp.Copied = append(gp.Copied, t.Node+" "+t.Subtable+" -> "+g.Temp+": "+t.SQL)
		}
	}
	for _, t := range p.Targets {
		gp.Targets = append(gp.Targets, goldenTarget{Node: t.Node, Subtable: t.Subtable, SQL: t.SQL})
	}
	for _, rn := range p.Renames {
		gp.Renames = append(gp.Renames, goldenRename{Physical: rn.Physical, Logical: rn.Logical})
	}
	return gp, nil
}

func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	r := testRouter(t)
	total := 0
	for file, cases := range loadGolden(t) {
		for i := range cases {
			c := &cases[i]
			p, e := outcome(r, c)
			if *update {
				c.Plan, c.Error = p, e
				continue
			}
			got := marshal(struct {
				Plan  *goldenPlan  `json:"plan,omitempty"`
				Error *goldenError `json:"error,omitempty"`
			}{p, e})
			want := marshal(struct {
				Plan  *goldenPlan  `json:"plan,omitempty"`
				Error *goldenError `json:"error,omitempty"`
			}{c.Plan, c.Error})
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %s\n  db %q sql %s\ngot:\n%s\nwant:\n%s", file, c.Comment, c.DB, c.SQL, got, want)
			}
		}
		total += len(cases)
		if *update {
			if err := os.WriteFile(file, marshal(cases), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d golden cases", total)
}
