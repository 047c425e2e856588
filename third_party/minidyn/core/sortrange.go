package core

import (
	"sort"
	"strings"

	"github.com/truora/minidyn/interpreter/language"
)

// sortPlace says where a range key value stands against a key condition's
// range key term: below the values it matches (-1), among them (0), or
// above them (1). It is monotone in the value's byte order, which is the
// order of a partition's keys.
type sortPlace func(rangeValue string) int

// sortRange narrows the sorted keys of one partition (each "<hash>.<range>",
// as keySchema.GetKey writes them, all with the same hash) to those whose
// range key value the key condition's range key term can match, by binary
// search, so a Query's cost follows what it reads, not the partition's
// size. Every key left is still matched against the whole condition; keys
// outside are ones the term refuses. Only S hash and range keys qualify (an
// N range key orders numerically, not as its text), and only a single term
// of the forms DynamoDB allows on a range key (=, <, <=, >, >=, BETWEEN,
// begins_with) with :values of type S; anything else leaves keys whole.
func sortRange(input *QueryInput, ks keySchema, attrs map[string]string, part string, n int, rangeOf func(i int) string) (lo, hi int) {
	place, ok := rangeTermPlace(input, ks, attrs)
	if !ok || !strings.HasPrefix(part, "S") {
		return 0, n
	}

	prefix := part[1:] + "."
	value := func(i int) (string, bool) {
		k := rangeOf(i)
		return strings.CutPrefix(k, prefix)
	}

	if n == 0 {
		return 0, 0
	}

	// Keys are sorted: when the first and the last have the prefix, so
	// does every key between them.
	if _, ok := value(0); !ok {
		return 0, n // a key of another shape: search it all
	}

	if _, ok := value(n - 1); !ok {
		return 0, n
	}

	lo = sort.Search(n, func(i int) bool { v, _ := value(i); return place(v) >= 0 })
	hi = sort.Search(n, func(i int) bool { v, _ := value(i); return place(v) > 0 })

	return lo, max(lo, hi)
}

// rangeTermPlace finds the one range key term of a Query's key condition
// (a conjunction with the hash key term) and returns where values stand
// against it.
func rangeTermPlace(input *QueryInput, ks keySchema, attrs map[string]string) (sortPlace, bool) {
	if ks.RangeKey == "" || attrs[ks.HashKey] != "S" || attrs[ks.RangeKey] != "S" {
		return nil, false
	}

	p := language.NewParser(language.NewLexer(input.KeyConditionExpression))

	cond := p.ParseConditionalExpression()
	if len(p.Errors()) != 0 || cond.Expression == nil {
		return nil, false
	}

	var places []sortPlace

	for _, term := range conjuncts(cond.Expression) {
		if place, ok := rangeTerm(term, input, ks.RangeKey); ok {
			places = append(places, place)
		}
	}

	if len(places) != 1 {
		return nil, false
	}

	return places[0], true
}

// conjuncts are the terms of an AND of terms.
func conjuncts(e language.Expression) []language.Expression {
	if infix, ok := e.(*language.InfixExpression); ok && infix.Operator == language.AND {
		return append(conjuncts(infix.Left), conjuncts(infix.Right)...)
	}

	return []language.Expression{e}
}

// rangeTerm reads term as a condition on the range key with S :values.
func rangeTerm(term language.Expression, input *QueryInput, rangeKey string) (sortPlace, bool) {
	switch t := term.(type) {
	case *language.InfixExpression:
		if !isKey(t.Left, input, rangeKey) {
			return nil, false
		}

		v, ok := sValue(t.Right, input)
		if !ok {
			return nil, false
		}

		return comparePlace(t.Operator, v)
	case *language.BetweenExpression:
		if !isKey(t.Left, input, rangeKey) {
			return nil, false
		}

		a, okA := sValue(t.Range[0], input)
		b, okB := sValue(t.Range[1], input)

		if !okA || !okB || a > b {
			return nil, false // DynamoDB refuses a > b: leave it to the interpreter
		}

		return func(r string) int {
			switch {
			case r < a:
				return -1
			case r > b:
				return 1
			}

			return 0
		}, true
	case *language.CallExpression:
		f, ok := t.Function.(*language.Identifier)
		if !ok || f.Value != "begins_with" || len(t.Arguments) != 2 || !isKey(t.Arguments[0], input, rangeKey) {
			return nil, false
		}

		p, ok := sValue(t.Arguments[1], input)
		if !ok {
			return nil, false
		}

		return func(r string) int {
			switch {
			case strings.HasPrefix(r, p):
				return 0
			case r < p:
				return -1
			}

			return 1
		}, true
	}

	return nil, false
}

// comparePlace is the place of values against range key op v.
func comparePlace(op, v string) (sortPlace, bool) {
	switch op {
	case language.EQ:
		return func(r string) int { return strings.Compare(r, v) }, true
	case language.LT:
		return func(r string) int { return boolPlace(r >= v, 1) }, true
	case language.LTE:
		return func(r string) int { return boolPlace(r > v, 1) }, true
	case language.GT:
		return func(r string) int { return boolPlace(r <= v, -1) }, true
	case language.GTE:
		return func(r string) int { return boolPlace(r < v, -1) }, true
	}

	return nil, false
}

func boolPlace(outside bool, side int) int {
	if outside {
		return side
	}

	return 0
}

// isKey says whether e names the range key (directly or through an alias,
// and not a :value of that name).
func isKey(e language.Expression, input *QueryInput, rangeKey string) bool {
	id, ok := e.(*language.Identifier)
	if !ok {
		return false
	}

	name := resolveName(id.Value, input.Aliases)
	if _, shadowed := input.ExpressionAttributeValues[name]; shadowed {
		return false
	}

	return name == rangeKey
}

// sValue is the S value a :placeholder names.
func sValue(e language.Expression, input *QueryInput) (string, bool) {
	id, ok := e.(*language.Identifier)
	if !ok {
		return "", false
	}

	name := resolveName(id.Value, input.Aliases)
	if len(name) == 0 || name[0] != ':' {
		return "", false
	}

	v, ok := input.ExpressionAttributeValues[name]
	if !ok || v == nil || v.S == nil {
		return "", false
	}

	return *v.S, true
}
