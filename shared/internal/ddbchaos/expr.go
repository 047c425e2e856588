package ddbchaos

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"

	"github.com/truora/minidyn/server"
)

//go:embed reserved.txt
var reservedText string

// reserved is DynamoDB's list of reserved words, upper case.
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, line := range strings.Split(reservedText, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			m[line] = true
		}
	}
	return m
}()

// keywords are the words of the expression grammars themselves: they are
// never attribute names.
var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "BETWEEN": true, "IN": true,
	"SET": true, "REMOVE": true, "ADD": true, "DELETE": true,
}

// tokens is what one expression refers to.
type tokens struct {
	names  []string // "#x" placeholders
	values []string // ":x" placeholders
	bare   []string // attribute names written as they are
}

func identChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// scan splits an expression into the placeholders and bare attribute names
// it uses. A word followed by "(" is a function; grammar keywords and
// numbers (list indexes) are neither.
func scan(expr string) tokens {
	var t tokens
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '#' || c == ':':
			j := i + 1
			for j < len(expr) && identChar(expr[j]) {
				j++
			}
			if c == '#' {
				t.names = append(t.names, expr[i:j])
			} else {
				t.values = append(t.values, expr[i:j])
			}
			i = j
		case identChar(c):
			j := i
			for j < len(expr) && identChar(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			isFunc := k < len(expr) && expr[k] == '('
			if !isFunc && !keywords[strings.ToUpper(word)] && !(word[0] >= '0' && word[0] <= '9') {
				t.bare = append(t.bare, word)
			}
			i = j
		default:
			i++
		}
	}
	return t
}

// exprSet is the expressions of one request (or one transaction action)
// and the placeholders it defines.
type exprSet struct {
	exprs  map[string]*string // "ConditionExpression" -> expression
	names  map[string]string
	values map[string]bool // the defined value placeholders
	// rawValues are the values themselves.
	rawValues map[string]*server.AttributeValue
	// namesGiven and valuesGiven say whether the maps were present at all
	// (an empty map present is refused).
	namesGiven, valuesGiven bool
}

// check refuses what DynamoDB refuses in expressions: an empty expression,
// a reserved word used unescaped, a placeholder used but not defined, one
// defined but not used, and empty placeholder maps.
func (e exprSet) check() error {
	if e.namesGiven && len(e.names) == 0 {
		return fmt.Errorf("ExpressionAttributeNames must not be empty")
	}
	if e.valuesGiven && len(e.values) == 0 {
		return fmt.Errorf("ExpressionAttributeValues must not be empty")
	}
	usedNames, usedValues := map[string]bool{}, map[string]bool{}
	kinds := make([]string, 0, len(e.exprs))
	for k := range e.exprs {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		p := e.exprs[kind]
		if p == nil {
			continue
		}
		if strings.TrimSpace(*p) == "" {
			return fmt.Errorf("Invalid %s: The expression can not be empty;", kind)
		}
		t := scan(*p)
		for _, w := range t.bare {
			if reserved[strings.ToUpper(w)] {
				return fmt.Errorf("Invalid %s: Attribute name is a reserved keyword; reserved keyword: %s", kind, w)
			}
		}
		for _, n := range t.names {
			if _, ok := e.names[n]; !ok {
				return fmt.Errorf("Invalid %s: An expression attribute name used in the document path is not defined; attribute name: %s", kind, n)
			}
			usedNames[n] = true
		}
		for _, v := range t.values {
			if !e.values[v] {
				return fmt.Errorf("Invalid %s: An expression attribute value used in expression is not defined; attribute value: %s", kind, v)
			}
			usedValues[v] = true
		}
	}
	if unused := missing(keys(e.names), usedNames); len(unused) > 0 {
		return fmt.Errorf("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", strings.Join(unused, ", "))
	}
	if unused := missing(keysBool(e.values), usedValues); len(unused) > 0 {
		return fmt.Errorf("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", strings.Join(unused, ", "))
	}
	return nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func keysBool(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// missing returns the members of all not in used, sorted.
func missing(all []string, used map[string]bool) []string {
	var out []string
	for _, k := range all {
		if !used[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
