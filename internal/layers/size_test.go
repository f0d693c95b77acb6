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

// Size limits for the proxy's own packages (proxy/...): a type that grows
// past them, or a file, is a responsibility that wants a room of its own
// (STYLE.md, "A type that grows past a few hundred lines"). The sizes are
// counted as declaration plus every method, doc comments included.
const (
	maxTypeLines = 650
	maxFileLines = 650
	// maxFuncLines bounds every function and method: one that grows past
	// it holds a responsibility that wants a room of its own. It is also
	// the bound of the handler of COM_QUERY (route, before, execute,
	// after), checked by name so that the check cannot lose it.
	maxFuncLines = 80
)

// TestProxySizes checks the size limits above over the non-test files of
// every package under proxy/.
func TestProxySizes(t *testing.T) {
	root := moduleRoot(t)
	sizes, files, funcs := measure(t, filepath.Join(root, "proxy"))
	for name, n := range files {
		if n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it by responsibility", name, n, maxFileLines)
		}
	}
	for name, n := range sizes {
		if n > maxTypeLines {
			t.Errorf("type %s spans %d lines with its methods (at most %d): give a responsibility its own type", name, n, maxTypeLines)
		}
	}
	if _, ok := funcs["server.handler.query"]; !ok {
		t.Errorf("server.handler.query not found: update the check")
	}
	for name, n := range funcs {
		if n > maxFuncLines {
			t.Errorf("func %s has %d lines (at most %d): give the responsibility a room of its own", name, n, maxFuncLines)
		}
	}
	if testing.Verbose() {
		type kv struct {
			k string
			v int
		}
		var all []kv
		for k, v := range sizes {
			all = append(all, kv{"type " + k, v})
		}
		for k, v := range files {
			all = append(all, kv{"file " + k, v})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
		for i := 0; i < len(all) && i < 15; i++ {
			t.Logf("%5d %s", all[i].v, all[i].k)
		}
	}
}

// measure returns, under dir, the lines of each named type with its
// methods (package.Type), of each non-test file (path relative to dir's
// parent), and of each function and method (package.Type.Method or
// package.Func).
func measure(t *testing.T, dir string) (types, files, funcs map[string]int) {
	types, files, funcs = map[string]int{}, map[string]int{}, map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Dir(dir), path)
		files[rel] = fset.Position(f.End()).Line
		pkg := f.Name.Name
		span := func(from, to token.Pos) int { return fset.Position(to).Line - fset.Position(from).Line + 1 }
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				if d.Tok != token.TYPE {
					continue
				}
				for _, s := range d.Specs {
					ts := s.(*ast.TypeSpec)
					from := ts.Pos()
					if len(d.Specs) == 1 {
						from = d.Pos()
						if d.Doc != nil {
							from = d.Doc.Pos()
						}
					} else if ts.Doc != nil {
						from = ts.Doc.Pos()
					}
					types[pkg+"."+ts.Name.Name] += span(from, ts.End())
				}
			case *ast.FuncDecl:
				from := d.Pos()
				if d.Doc != nil {
					from = d.Doc.Pos()
				}
				n := span(from, d.End())
				name := pkg + "." + d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					recv := receiverName(d.Recv.List[0].Type)
					types[pkg+"."+recv] += n
					name = pkg + "." + recv + "." + d.Name.Name
				}
				funcs[name] = span(d.Pos(), d.End())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return types, files, funcs
}

// receiverName returns the type name of a method's receiver (T, *T, T[P]).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// moduleRoot returns the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}
