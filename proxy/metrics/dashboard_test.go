package metrics

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/deadlock"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/xa"
)

// dashboardPath is the Grafana dashboard operators import.
const dashboardPath = "../../etc/grafana-shardgate.json"

// TestGrafanaDashboardImports: etc/grafana-shardgate.json has what
// Grafana's import needs (a title and uid, a schemaVersion, no database id,
// panels with unique ids, a grid position on the 24-column grid that
// overlaps no other panel, and targets with unique refIds); every panel
// queries the data source chosen at import through the datasource
// variable, not a uid of the machine it was made on; and every metric and
// label its PromQL names is one /metrics exports, read from a scrape of a
// registry whose snapshot has every conditional series (replicas, fleet,
// XA, deadlocks, workflows, a client error), with the Go and process
// collectors.
func TestGrafanaDashboardImports(t *testing.T) {
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		ID            *int    `json:"id"`
		UID           string  `json:"uid"`
		Title         string  `json:"title"`
		SchemaVersion float64 `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name, Type string
				Query      any
				Datasource *dashDatasource
			}
		}
		Panels []dashPanel
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardPath, err)
	}
	if dash.ID != nil {
		t.Errorf("the dashboard has a database id %d: an import would overwrite that dashboard", *dash.ID)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("uid %q, title %q: an import needs both", dash.UID, dash.Title)
	}
	if dash.SchemaVersion < 36 { // the first with datasource references as {type, uid}
		t.Errorf("schemaVersion %v, want at least 36", dash.SchemaVersion)
	}

	exported := scrapeFamilies(t, fullScrape(t))
	hasDS := false
	for _, v := range dash.Templating.List {
		switch {
		case v.Type == "datasource":
			if v.Name != "datasource" || v.Query != "prometheus" {
				t.Errorf("datasource variable %q of %v, want datasource of prometheus", v.Name, v.Query)
			}
			hasDS = true
		case v.Type == "query":
			checkDatasource(t, "variable "+v.Name, v.Datasource)
			q, _ := v.Query.(string)
			if m, ok := strings.CutPrefix(q, "label_values("); ok {
				m, label, _ := strings.Cut(strings.TrimSuffix(m, ")"), ",")
				checkQuery(t, "variable "+v.Name, fmt.Sprintf("%s{%s=\"\"}", m, strings.TrimSpace(label)), exported)
			}
		}
	}
	if !hasDS {
		t.Error("no datasource variable: an import could not choose the Prometheus data source")
	}

	if len(dash.Panels) < 15 {
		t.Fatalf("%d panels", len(dash.Panels))
	}
	ids := map[int]string{}
	queries := 0
	for i, p := range dash.Panels {
		name := fmt.Sprintf("panel %d %q", i, p.Title)
		if p.Title == "" || !slices.Contains([]string{"timeseries", "stat", "gauge", "bargauge", "table", "heatmap"}, p.Type) {
			t.Errorf("%s: type %q, want a titled timeseries, stat, gauge, bargauge, table or heatmap", name, p.Type)
		}
		if p.ID <= 0 || ids[p.ID] != "" {
			t.Errorf("%s: id %d is not positive or is %s's too", name, p.ID, ids[p.ID])
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v is off the 24-column grid", name, g)
		}
		for _, q := range dash.Panels[:i] {
			o := q.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("%s overlaps %q", name, q.Title)
			}
		}
		checkDatasource(t, name, p.Datasource)
		if len(p.Targets) == 0 {
			t.Errorf("%s has no targets", name)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: target %+v has no expr, or no refId or another's", name, tg)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil {
				checkDatasource(t, name, tg.Datasource)
			}
			checkQuery(t, name, tg.Expr, exported)
			queries++
		}
	}
	t.Logf("%d panels, %d queries over %d exported series names", len(dash.Panels), queries, len(exported))
}

type dashDatasource struct{ Type, UID string }

type dashPanel struct {
	ID         int
	Type       string
	Title      string
	Datasource *dashDatasource
	GridPos    struct{ X, Y, W, H int }
	Targets    []struct {
		Expr       string
		RefID      string `json:"refId"`
		Datasource *dashDatasource
	}
}

// checkDatasource: a query goes to the data source the datasource
// variable names.
func checkDatasource(t *testing.T, what string, ds *dashDatasource) {
	t.Helper()
	if ds == nil || ds.Type != "prometheus" || (ds.UID != "${datasource}" && ds.UID != "$datasource") {
		t.Errorf("%s: datasource %+v, want {prometheus ${datasource}}", what, ds)
	}
}

// checkQuery: every metric expr names is exported, and every label it
// groups or matches by is one of those metrics' labels (or instance and
// job, which Prometheus adds).
func checkQuery(t *testing.T, what, expr string, exported map[string]map[string]bool) {
	t.Helper()
	metrics, labels, err := promQLNames(expr)
	if err != nil {
		t.Errorf("%s: %q: %v", what, expr, err)
		return
	}
	if len(metrics) == 0 {
		t.Errorf("%s: %q names no metric", what, expr)
	}
	known := map[string]bool{"instance": true, "job": true}
	for _, m := range metrics {
		ls, ok := exported[m]
		if !ok {
			t.Errorf("%s queries %s, which /metrics does not export", what, m)
		}
		for l := range ls {
			known[l] = true
		}
	}
	for _, l := range labels {
		if !known[l] {
			t.Errorf("%s: %q uses label %s, which none of %v has", what, expr, l, metrics)
		}
	}
}

// fullScrape is the exposition of a registry whose snapshot has every
// series the proxy can export, each conditional one present.
func fullScrape(t *testing.T) string {
	t.Helper()
	wf := move.Status{Workflow: move.Workflow{Spec: move.Spec{Name: "w", Kind: move.KindReshard, DB: "d", Table: "t"}}}
	wf.State.Phase = move.PhaseCopying
	m := New(Options{DigestSize: 10, Nodes: []string{"node1"}, Collector: Collector{
		Stats: func() Stats {
			return Stats{
				Nodes: []NodeStats{{Name: "node1", Up: true, Replicas: []ReplicaStats{{Addr: "r1", Up: true, Usable: true}}}},
				Fleet: &FleetStats{ID: "p1", Leader: "p1"},
			}
		},
		XA:        func() (xa.Stats, bool) { return xa.Stats{}, true },
		Deadlock:  func() (deadlock.Stats, bool) { return deadlock.Stats{}, true },
		Workflows: func() []move.Status { return []move.Status{wf} },
	}})
	m.Observe(&Statement{SQL: "SELECT 1", Keyword: "SELECT", Node: "node1", Unsharded: true, ErrCode: 1064, Start: time.Now()})
	m.ClientError(1064)
	return scrape(t, m)
}

// scrapeFamilies reads an exposition into series name -> label names. The
// names come from the # TYPE lines: a histogram's are NAME_bucket (with
// le), NAME_sum and NAME_count, a summary's NAME (with quantile), NAME_sum
// and NAME_count.
func scrapeFamilies(t *testing.T, text string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	typ := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			typ[name] = kind
			switch kind {
			case "histogram":
				out[name+"_bucket"] = map[string]bool{"le": true}
				out[name+"_sum"], out[name+"_count"] = map[string]bool{}, map[string]bool{}
			case "summary":
				out[name] = map[string]bool{"quantile": true}
				out[name+"_sum"], out[name+"_count"] = map[string]bool{}, map[string]bool{}
			default:
				out[name] = map[string]bool{}
			}
			continue
		}
		if l == "" || l[0] == '#' {
			continue
		}
		name, labels, _ := strings.Cut(l, "{")
		if i := strings.IndexByte(name, ' '); i >= 0 {
			name, labels = name[:i], ""
		}
		ls, ok := out[name]
		if !ok {
			t.Fatalf("sample %q has no # TYPE line", l)
		}
		for labels != "" && labels[0] != '}' && labels[0] != ' ' {
			k, v, _ := strings.Cut(labels, "=")
			ls[k] = true
			// v is "value"...: skip the quoted value (with escapes) and a comma.
			i := 1
			for ; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
			labels = strings.TrimPrefix(v[min(i+1, len(v)):], ",")
		}
	}
	if len(typ) == 0 {
		t.Fatal("no # TYPE lines in the scrape")
	}
	return out
}

// promQL keywords and aggregation operators: identifiers that are not
// metric names.
var (
	promKeywords     = []string{"and", "or", "unless", "bool", "offset", "atan2"}
	promLabelClauses = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	promAggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)

// promQLNames returns the metric names a PromQL expression selects and the
// label names it matches ({l="v"}) or groups by (by, without, on,
// ignoring, group_left, group_right). Grafana variables ($instance,
// $__rate_interval) may stand in label values and ranges.
func promQLNames(expr string) (metrics, labels []string, err error) {
	ident := func(c byte) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	// skipString returns the index after the string literal at i.
	skipString := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d", i)
	}
	// next skips blanks.
	next := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	depth := 0
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == ',':
			i++
		case c == '"' || c == '\'' || c == '`':
			if i, err = skipString(i); err != nil {
				return nil, nil, err
			}
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, nil, fmt.Errorf("unbalanced ) at %d", i)
			}
			i++
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return nil, nil, fmt.Errorf("unterminated [ at %d", i)
			}
			i += j + 1
		case c == '{':
			// Label matchers: name op "value", ...
			i++
			for {
				i = next(i)
				if i >= len(expr) {
					return nil, nil, fmt.Errorf("unterminated {")
				}
				if expr[i] == '}' {
					i++
					break
				}
				j := i
				for j < len(expr) && ident(expr[j]) {
					j++
				}
				if j == i {
					return nil, nil, fmt.Errorf("a label name expected at %d", i)
				}
				labels = append(labels, expr[i:j])
				i = next(j)
				for i < len(expr) && strings.IndexByte("=!~", expr[i]) >= 0 {
					i++
				}
				i = next(i)
				if i >= len(expr) || (expr[i] != '"' && expr[i] != '\'' && expr[i] != '`') {
					return nil, nil, fmt.Errorf("a label value expected at %d", i)
				}
				if i, err = skipString(i); err != nil {
					return nil, nil, err
				}
				if i = next(i); i < len(expr) && expr[i] == ',' {
					i++
				}
			}
		case c == '$':
			i++
			for i < len(expr) && (ident(expr[i]) || expr[i] == '{' || expr[i] == '}') {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (ident(expr[i]) || expr[i] == '.') {
				i++
			}
		case ident(c):
			j := i
			for j < len(expr) && ident(expr[j]) {
				j++
			}
			word, k := expr[i:j], next(j)
			call := k < len(expr) && expr[k] == '('
			switch {
			case slices.Contains(promLabelClauses, word):
				if !call {
					i = j // group_left without labels
					continue
				}
				end := strings.IndexByte(expr[k:], ')')
				if end < 0 {
					return nil, nil, fmt.Errorf("unterminated %s (", word)
				}
				for _, l := range strings.Split(expr[k+1:k+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						labels = append(labels, l)
					}
				}
				i = k + end + 1
				continue
			case call, slices.Contains(promKeywords, word), slices.Contains(promAggregations, word):
				// A function, an operator, or an aggregation followed by by/without.
			case word == "inf" || word == "nan" || word == "Inf" || word == "NaN":
			default:
				metrics = append(metrics, word)
			}
			i = j
		default:
			if strings.IndexByte("+-*/%^=!<>@", c) < 0 {
				return nil, nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			i++
		}
	}
	if depth != 0 {
		return nil, nil, fmt.Errorf("unbalanced (")
	}
	return metrics, labels, nil
}

// TestPromQLNames: the names the dashboard's check reads from PromQL.
func TestPromQLNames(t *testing.T) {
	for _, c := range []struct {
		expr            string
		metrics, labels string
	}{
		{`sum by (route) (rate(shardgate_statements_total{instance=~"$instance"}[1m]))`, "shardgate_statements_total", "route instance"},
		{`histogram_quantile(0.99, sum by (le, route) (rate(x_bucket{a="}",b!~'y'}[$__rate_interval])))`, "x_bucket", "le route a b"},
		{`sum(rate(a[5m])) / (sum(rate(a[5m])) + sum without(node) (rate(b[5m])))`, "a a b", "node"},
		{`time() - process_start_time_seconds`, "process_start_time_seconds", ""},
		{`a > bool 0.5 and on(node) group_left b offset 5m`, "a b", "node"},
		{`max(a) by (x)`, "a", "x"},
	} {
		m, l, err := promQLNames(c.expr)
		if err != nil || strings.Join(m, " ") != c.metrics || strings.Join(l, " ") != c.labels {
			t.Errorf("promQLNames(%s) = %q, %q, %v; want %q, %q", c.expr, m, l, err, c.metrics, c.labels)
		}
	}
	for _, bad := range []string{`sum(a`, `a{b="c}`, `a{="c"}`, `a)`} {
		if _, _, err := promQLNames(bad); err == nil {
			t.Errorf("promQLNames(%s): no error", bad)
		}
	}
}
