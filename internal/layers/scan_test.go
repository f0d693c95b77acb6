package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Each fact about a statement is decided once, in the router, from the
// statement (router.Classify, the parser); code above the router never
// scans SQL text again (STYLE.md, "One fact, one place"): a substring test
// lets a string literal or a comment decide a transaction boundary.
//
// TestNoTextScans enforces it over the proxy's packages: a call of a
// function of package strings or bytes that searches or cuts text is
// allowed only in the functions listed in scanAllowed, each with the
// reason its text is not a client's statement.

// scanFuncs are the functions of strings and bytes that look into text.
var scanFuncs = map[string]bool{
	"Contains": true, "ContainsAny": true, "ContainsRune": true, "ContainsFunc": true,
	"Index": true, "IndexAny": true, "IndexByte": true, "IndexRune": true, "IndexFunc": true,
	"LastIndex": true, "LastIndexAny": true, "LastIndexByte": true, "LastIndexFunc": true,
	"HasPrefix": true, "HasSuffix": true, "EqualFold": true, "Count": true,
	"Fields": true, "FieldsFunc": true, "FieldsSeq": true, "Split": true, "SplitN": true, "SplitSeq": true,
	"SplitAfter": true, "SplitAfterN": true, "Cut": true, "CutPrefix": true, "CutSuffix": true,
	"ToUpper": true, "ToLower": true, "Title": true,
	"Trim": true, "TrimSpace": true, "TrimLeft": true, "TrimRight": true, "TrimPrefix": true, "TrimSuffix": true,
	"TrimFunc": true, "TrimLeftFunc": true, "TrimRightFunc": true,
}

// scanAllowed lists, by file (relative to the module) and function
// (Type.Method or Func), where text that is not a client statement is
// searched, with the reason.
var scanAllowed = map[string]string{
	"proxy/server/rcache.go:tableKey":                  "logical table names of the configuration, the change stream and information_schema",
	"proxy/server/rcache_query.go:resultCache.touches": "logical table names of a plan and of the configuration",
	"proxy/session/cache.go:raisesFlag":                "variable names the server reports in session tracking",
	"proxy/session/cache.go:withoutFillNoise":          "variable names the server reports in session tracking",
	"proxy/session/counts.go:stmtState.readUserVars":   "user variable names the server lists (case-insensitive: lowered as SET's are)",
	"proxy/session/counts.go:stmtState.carrySysVar":    "a system variable's name the server reported (lowered as SET's are)",
	"proxy/engine/compare.go:canonicalDecimal":         "column values (DECIMAL)",
	"proxy/engine/compare.go:collationCmp":             "collation names from the server's column definitions",
	"proxy/engine/compare.go:compareValues":            "column values (PAD SPACE comparison)",
	"proxy/engine/compare.go:generalCIKey":             "column values (collation keys)",
	"proxy/engine/compare.go:splitDecimal":             "column values (DECIMAL)",
	"proxy/engine/compare.go:timeKey":                  "column values (TIME)",
	"proxy/engine/compare.go:unicodeCompare":           "column values (collation keys)",
	"proxy/engine/compare.go:unicodeKey":               "column values (collation keys)",
	"proxy/engine/numconv.go:textNumber":               "column values converted to numbers",
	"proxy/engine/group.go:formatDouble":               "numbers the proxy formats",
	"proxy/engine/load.go:loadSplitter.field":          "the client's LOAD DATA file, cut by its FIELDS terminator",
	"proxy/engine/load.go:loadSplitter.lineEnd":        "the client's LOAD DATA file, cut by its LINES terminator",
	"proxy/engine/meta.go:Renames.Text":                "result text (SHOW CREATE TABLE) whose physical names become logical",
	"proxy/engine/writes.go:infoSum.add":               "the server's OK info text (Records: Deleted:)",
	"proxy/engine/fallback.go:gather.definition":       "the server's SHOW CREATE TABLE output",
	"proxy/server/catalog.go:tables.Numeric":           "column types from information_schema",
	"proxy/server/reload.go:compareConfigs":            "struct tags of the configuration",
	"proxy/engine/numconv.go:parseRat":                 "column values converted to numbers",
	"proxy/server/auth.go:auth.sha2Full":               "password bytes",
	"proxy/server/failpoint.go:FailpointKnobs":         "a failpoint specification from the operator",
	"proxy/server/local.go:reportedVars":               "variable names the server reports in session tracking",
	"proxy/session/conns.go:varState.absorb":           "what the server reports in session tracking (variable names, transaction characteristics)",
	"proxy/session/vars.go:literalOf":                  "column values read back",
	"proxy/session/track.go:ParseTrackers":             "the tracker values the server reports (session_track_*)",
	"proxy/session/track.go:trackState.SetTrackers":    "variable names the server reports in session_track_system_variables",
	"proxy/session/track.go:trackState.tracksVar":      "variable names the server reports in session tracking",
	"proxy/engine/expr.go:memberNumber":                "a SET column's value (its members, comma-separated)",
	"proxy/server/into.go:assignedLiteral":             "column values of the row the proxy computed (DECIMAL and DOUBLE text)",
	"proxy/session/vars.go:varState.ReadBack":          "assignment targets the proxy composed",
	"proxy/session/vars.go:varState.syncVars":          "assignment targets the proxy composed",
	"proxy/session/vars.go:varState.setCompletionType": "the value the server reports for completion_type",
	"proxy/admin/http.go:Console.serveChanges":         "an admin URL's query parameter",
	"proxy/admin/sql.go:Console.adminDigest":           "the values of an admin statement the router read",
	"proxy/admin/sql.go:Console.adminNode":             "the values of an admin statement the router read",
	"proxy/admin/sql.go:Console.adminServer":           "the values of an admin statement the router read",
	"proxy/admin/sql.go:splitComma":                    "the values of an admin statement the router read",
	"proxy/admin/workflows.go:flows.serve":             "an admin URL's path",
	"proxy/admin/workflows.go:flows.sql":               "the values of an admin statement the router read",
	"proxy/server/move.go:workflows.Spec":              "db.table names in a workflow request",
	"proxy/server/move.go:workflows.resume":            "db.table names in the workflow state",
	"proxy/server/processlist.go:registry.killUser":    "account names of KILL USER",
	"proxy/engine/numconv.go:constValue":               "a numeric literal of HAVING (its digits), as the router passed it in the merge plan",
}

func TestNoTextScans(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var found []string
	used := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "proxy"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pkgs := map[string]bool{}
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); p == "strings" || p == "bytes" {
				name := p
				if imp.Name != nil {
					name = imp.Name.Name
				}
				pkgs[name] = true
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				name = receiverName(fn.Recv.List[0].Type) + "." + name
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && pkgs[id.Name] && scanFuncs[sel.Sel.Name] {
					key := rel + ":" + name
					used[key] = true
					if _, ok := scanAllowed[key]; !ok {
						found = append(found, key+" calls "+id.Name+"."+sel.Sel.Name+" at line "+
							itoa(fset.Position(call.Pos()).Line))
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range scanAllowed {
		if !used[key] {
			t.Errorf("%s is listed in scanAllowed but scans no text: take it out", key)
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: a text scan above the router; decide the fact in the router (router.Classify and friends), or, for text that is not a statement, add the function to scanAllowed with the reason", f)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
