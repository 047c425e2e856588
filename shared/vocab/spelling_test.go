package vocab_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/vocab"
)

// spellings is every state's spelling, and the policy's verdicts (declared
// in shared/policy/document.go).
func spellings() map[string]bool {
	out := map[string]bool{"require_approval": true}
	for _, d := range vocab.Decisions() {
		out[string(d)] = true
	}
	for _, s := range vocab.ApprovalStatuses() {
		out[string(s)] = true
	}
	for _, c := range vocab.Choices() {
		out[string(c)] = true
	}
	for _, s := range vocab.RunStatuses() {
		out[string(s)] = true
	}
	return out
}

// declared are the files that spell the states: their types. An input
// request's states (shared/elicitation) are a vocabulary of their own.
var declared = []string{"shared/vocab/vocab.go", "shared/policy/document.go", "shared/elicitation/elicitation.go"}

// otherWords are literals in code (not tests) that are spelled like a
// state but are another vocabulary, each with why.
var otherWords = map[string]map[string]string{
	"cmd/fluidbox/hook.go": {
		"allow": "Claude Code's hook protocol: permissionDecision",
		"deny":  "Claude Code's hook protocol: permissionDecision",
	},
	"shared/policy/claude.go": {
		"allow": "Claude Code's settings file: permissions.allow",
		"deny":  "Claude Code's settings file: permissions.deny",
	},
	"cmd/fluidbox/approvals.go": {"deny": "the CLI command's name"},
	"cmd/fluidbox/main.go":      {"deny": "the CLI command's name"},
	"cmd/fluidbox/cli.go":       {"expired": "the time left on an approval, as the CLI prints it"},
	"shared/store/sources.go":   {"pending": "the name of the trigger source counter's attribute"},
}

// wireFields are the fields typed by this package; a test comparing one of
// them with a bare literal (or setting one to it) spells a state outside
// its type.
var wireFields = []string{"Status", "Decision", "WantStatus", "Outcome"}

// TestNoStateLiterals greps the module for string literals spelling a
// state outside its type: code names the constant. Tests may spell the
// wire (a JSON body, a decoded map, a rendered message), but not set or
// compare a typed field with a bare literal.
func TestNoStateLiterals(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	words := spellings()
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "third_party" || rel == "node_modules" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || slices.Contains(declared, rel) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, hit := range literals(f, words, strings.HasSuffix(rel, "_test.go")) {
			if _, ok := otherWords[rel][hit.word]; ok {
				continue
			}
			found = append(found, fmt.Sprintf("%s:%d: %q", rel, fset.Position(hit.pos).Line, hit.word))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s spells a state outside its type; use the vocab (or policy.Verdict) constant", f)
	}
}

type hit struct {
	pos  token.Pos
	word string
}

// literals finds the state spellings in f: in code every string literal
// (struct tags and imports aside); in a test only those compared with,
// assigned to or keyed as a typed field.
func literals(f *ast.File, words map[string]bool, test bool) []hit {
	l := &literalFinder{words: words}
	if test {
		ast.Inspect(f, l.inTest)
	} else {
		ast.Inspect(f, l.inCode)
	}
	return l.out
}

// literalFinder collects the hits of one file.
type literalFinder struct {
	words map[string]bool
	out   []hit
}

// add records e if it is a string literal spelling a state.
func (l *literalFinder) add(e ast.Expr) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return
	}
	if s, err := strconv.Unquote(lit.Value); err == nil && l.words[s] {
		l.out = append(l.out, hit{e.Pos(), s})
	}
}

// inCode visits code: every expression but imports and struct tags.
func (l *literalFinder) inCode(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.ImportSpec:
		return false
	case *ast.Field:
		// A struct tag names an attribute, not a state.
		if n.Type != nil {
			ast.Inspect(n.Type, func(m ast.Node) bool {
				if e, ok := m.(ast.Expr); ok {
					l.add(e)
				}
				return true
			})
		}
		return false
	case ast.Expr:
		l.add(n)
	}
	return true
}

// isField reports whether e selects a typed field.
func isField(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && slices.Contains(wireFields, sel.Sel.Name)
}

// inTest visits a test: literals compared with, assigned to, keyed as or
// switched on a typed field.
func (l *literalFinder) inTest(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.BinaryExpr:
		if n.Op == token.EQL || n.Op == token.NEQ {
			if isField(n.X) {
				l.add(n.Y)
			}
			if isField(n.Y) {
				l.add(n.X)
			}
		}
	case *ast.AssignStmt:
		for i, lhs := range n.Lhs {
			if isField(lhs) && i < len(n.Rhs) {
				l.add(n.Rhs[i])
			}
		}
	case *ast.KeyValueExpr:
		if k, ok := n.Key.(*ast.Ident); ok && slices.Contains(wireFields, k.Name) {
			l.add(n.Value)
		}
	case *ast.SwitchStmt:
		if n.Tag != nil && isField(n.Tag) {
			l.addCases(n.Body)
		}
	}
	return true
}

// addCases adds the expressions of every case of a switch.
func (l *literalFinder) addCases(body *ast.BlockStmt) {
	for _, c := range body.List {
		for _, e := range c.(*ast.CaseClause).List {
			l.add(e)
		}
	}
}
