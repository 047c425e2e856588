package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestEveryMethodHasAStoreTest keeps the conformance suite whole: every
// exported method of *Store must be called by name in a test of this
// package, so a new method cannot land tested only through its callers
// (whose tests do not pin its conditions, sentinels or paging).
func TestEveryMethodHasAStoreTest(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	called := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(name, "_test.go") {
			methods = append(methods, storeMethods(f)...)
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
					called[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	if len(methods) < 20 {
		t.Fatalf("found only %d methods of *Store: is the test reading the right package?", len(methods))
	}
	slices.Sort(methods)
	for _, m := range methods {
		if !called[m] {
			t.Errorf("(*Store).%s is called by no test of shared/store: add a store-level test of its conditions, sentinels and paging", m)
		}
	}
}

// storeMethods lists the exported methods f declares on Store or *Store.
func storeMethods(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 || !fn.Name.IsExported() {
			continue
		}
		typ := fn.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.Name == "Store" {
			out = append(out, fn.Name.Name)
		}
	}
	return out
}
