package core

import (
	"github.com/truora/minidyn/interpreter/language"
	"github.com/truora/minidyn/types"
)

// partitionOf names the partition item belongs to under ks: its hash key
// value, tagged with its type. Items without a usable hash key value share
// the partition "", which no Query is confined to (see queryPartition).
func partitionOf(ks keySchema, attrs map[string]string, item map[string]*types.Item) string {
	v, ok := item[ks.HashKey]
	if !ok || v == nil {
		return ""
	}

	return partitionValue(attrs[ks.HashKey], v)
}

// partitionValue is the partition name of hash key value v of attribute type
// typ, or "" when typ is not one whose equality is the equality of the
// stored text: S and B. (N compares numerically, "1" = "1.0", so a Query on
// an N hash key still searches the whole table.)
func partitionValue(typ string, v *types.Item) string {
	switch {
	case typ == "S" && v.S != nil:
		return "S" + *v.S
	case typ == "B" && v.B != nil:
		return "B" + string(v.B)
	default:
		return ""
	}
}

// queryPartition returns the partition a Query's key condition confines it
// to under ks: the condition must be hashKey = :value, alone or as a term
// of a conjunction (AND), with :value of the hash key's type. Anything else
// (a condition that does not parse, OR, NOT, an unknown placeholder, a
// value of another type) gives ok false, and the Query searches every
// item, as it always did: this is only a shortcut past items the condition
// cannot match.
func queryPartition(input *QueryInput, ks keySchema, attrs map[string]string) (string, bool) {
	p := language.NewParser(language.NewLexer(input.KeyConditionExpression))

	cond := p.ParseConditionalExpression()
	if len(p.Errors()) != 0 || cond.Expression == nil {
		return "", false
	}

	v, ok := hashKeyValue(cond.Expression, input, ks.HashKey)
	if !ok {
		return "", false
	}

	part := partitionValue(attrs[ks.HashKey], v)

	return part, part != ""
}

// hashKeyValue finds the term hashKey = :value in a conjunction and returns
// the value, resolving names as the interpreter's environment does
// (aliases first; item attributes and values share one namespace).
func hashKeyValue(e language.Expression, input *QueryInput, hashKey string) (*types.Item, bool) {
	infix, ok := e.(*language.InfixExpression)
	if !ok {
		return nil, false
	}

	switch infix.Operator {
	case language.AND:
		if v, ok := hashKeyValue(infix.Left, input, hashKey); ok {
			return v, true
		}

		return hashKeyValue(infix.Right, input, hashKey)
	case language.EQ:
		if v, ok := keyEqualsValue(infix.Left, infix.Right, input, hashKey); ok {
			return v, true
		}

		return keyEqualsValue(infix.Right, infix.Left, input, hashKey)
	default:
		return nil, false
	}
}

func keyEqualsValue(key, value language.Expression, input *QueryInput, hashKey string) (*types.Item, bool) {
	k, ok := key.(*language.Identifier)
	if !ok {
		return nil, false
	}

	v, ok := value.(*language.Identifier)
	if !ok {
		return nil, false
	}

	keyName, valueName := resolveName(k.Value, input.Aliases), resolveName(v.Value, input.Aliases)
	if keyName != hashKey {
		return nil, false
	}

	if _, shadowed := input.ExpressionAttributeValues[keyName]; shadowed {
		return nil, false
	}

	if len(valueName) == 0 || valueName[0] != ':' {
		return nil, false
	}

	val, ok := input.ExpressionAttributeValues[valueName]

	return val, ok && val != nil
}

func resolveName(name string, aliases map[string]string) string {
	if alias, ok := aliases[name]; ok {
		return alias
	}

	return name
}

// probeKeyCondition evaluates a Query's key condition against one item the
// whole-table search would have evaluated it against, when the Query's
// partition is empty and it has no start key: that search reported an
// ill-typed or unsupported condition from the first item it met (an item
// of the index, for an index Query), and a partition read meets none.
func (t *Table) probeKeyCondition(input QueryInput, index *index) error {
	if index != nil {
		for key := range index.refs {
			_, _, err := t.matchKey(input, t.Data[key])
			return err
		}

		return nil
	}

	for _, item := range t.Data {
		_, _, err := t.matchKey(input, item)
		return err
	}

	return nil
}
