package ddbchaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/truora/minidyn/server"
)

// schema is what the validator knows of a table: its key attributes and
// those of its global secondary indexes.
type schema struct {
	pk, sk string
	gsis   map[string][2]string // index name -> hash, range attribute
}

// gsiKeys lists every attribute that is a key of some index.
func (s *schema) gsiKeys() map[string]string {
	out := map[string]string{}
	for name, k := range s.gsis {
		for _, a := range k {
			if a != "" {
				out[a] = name
			}
		}
	}
	return out
}

// action is one write or read action, in the form the checks need.
type action struct {
	table string
	key   map[string]*server.AttributeValue // Key, or the key of Item
	item  map[string]*server.AttributeValue // a Put's whole item
	exprs exprSet
	// update is the UpdateExpression, for the checks of what it sets.
	update *string
}

func newExprs(names map[string]string, values map[string]*server.AttributeValue, exprs map[string]*string) exprSet {
	e := exprSet{exprs: exprs, names: names, values: map[string]bool{}, namesGiven: names != nil, valuesGiven: values != nil}
	for k := range values {
		e.values[k] = true
	}
	return e
}

// checkKey refuses a key that does not match the table's key schema, or
// whose values are empty or too long.
func checkKey(s *schema, key map[string]*server.AttributeValue) error {
	want := 1
	if s.sk != "" {
		want = 2
	}
	if len(key) != want {
		return fmt.Errorf("The provided key element does not match the schema")
	}
	for attr, limit := range map[string]int{s.pk: MaxPartitionKeyBytes, s.sk: MaxSortKeyBytes} {
		if attr == "" {
			continue
		}
		v, ok := key[attr]
		if !ok || v == nil {
			return fmt.Errorf("The provided key element does not match the schema")
		}
		n := -1
		switch {
		case v.S != nil:
			n = len(*v.S)
		case v.B != nil:
			n = len(v.B)
		case v.N != nil:
			n = 1
		}
		switch {
		case n < 0:
			return fmt.Errorf("The provided key element does not match the schema")
		case n == 0:
			return fmt.Errorf("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", attr)
		case n > limit && attr == s.pk:
			return fmt.Errorf("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of %d bytes", limit)
		case n > limit:
			return fmt.Errorf("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of %d bytes", limit)
		}
	}
	return nil
}

// checkIndexValues refuses an item whose value for an index key is empty
// or not a string (the table declares every key attribute as S).
func checkIndexValues(s *schema, item map[string]*server.AttributeValue) error {
	for attr, index := range s.gsiKeys() {
		v, ok := item[attr]
		if !ok {
			continue // sparse: the item is not in the index
		}
		if v == nil || v.S == nil {
			return fmt.Errorf("One or more parameter values were invalid: Type mismatch for Index Key %s Expected: S IndexName: %s", attr, index)
		}
		if *v.S == "" {
			return fmt.Errorf("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: %s, IndexKey: %s", index, attr)
		}
	}
	return nil
}

// setTargets finds "path = :value" assignments of an update expression.
var setTargets = regexp.MustCompile(`([#A-Za-z_][#A-Za-z0-9_.]*)\s*=\s*(:[A-Za-z0-9_]+)`)

// checkAction applies every per-action rule.
func (l *Layer) checkAction(a action) error {
	s, err := l.schemaOf(a.table)
	if errors.Is(err, errNoTable) {
		return nil // the server behind answers ResourceNotFoundException
	}
	key := a.key
	if a.item != nil {
		key = map[string]*server.AttributeValue{}
		for _, k := range []string{s.pk, s.sk} {
			if v, ok := a.item[k]; ok && k != "" {
				key[k] = v
			}
		}
		if err := checkIndexValues(s, a.item); err != nil {
			return err
		}
		if n := itemSize(a.item); n > MaxItemBytes {
			return fmt.Errorf("Item size has exceeded the maximum allowed size (%d bytes)", n)
		}
		if err := checkValues(a.item); err != nil {
			return err
		}
	}
	if key != nil || a.item != nil {
		if err := checkKey(s, key); err != nil {
			return err
		}
	}
	if err := a.exprs.check(); err != nil {
		return err
	}
	if a.update != nil {
		if err := l.checkUpdate(s, a); err != nil {
			return err
		}
	}
	return nil
}

// checkUpdate refuses an update that changes a key attribute or sets an
// index key to an empty string, and one whose values alone exceed an
// item's size.
func (l *Layer) checkUpdate(s *schema, a action) error {
	resolve := func(p string) string {
		first := strings.SplitN(p, ".", 2)[0]
		if strings.HasPrefix(first, "#") {
			return a.exprs.names[first]
		}
		return first
	}
	gsi := s.gsiKeys()
	for _, m := range setTargets.FindAllStringSubmatch(*a.update, -1) {
		target := resolve(m[1])
		if target == s.pk || target == s.sk {
			return fmt.Errorf("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", target)
		}
		if index, ok := gsi[target]; ok {
			if v := a.exprs.rawValues[m[2]]; v != nil && (v.S == nil || *v.S == "") {
				return fmt.Errorf("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: %s, IndexKey: %s", index, target)
			}
		}
	}
	n := 0
	for _, v := range a.exprs.rawValues {
		n += valueSize(v)
	}
	if n > MaxItemBytes {
		return fmt.Errorf("Item size to update has exceeded the maximum allowed size")
	}
	return nil
}

// validate checks one request of the DynamoDB JSON protocol. It returns
// the actions it contains (for fault matching) and the reason DynamoDB
// would refuse it, if any.
func (l *Layer) validate(op string, body []byte) ([]action, error) {
	switch op {
	case "PutItem":
		return decodeThen(body, l.validatePut)
	case "GetItem":
		return decodeThen(body, l.validateGet)
	case "DeleteItem":
		return decodeThen(body, l.validateDelete)
	case "UpdateItem":
		return decodeThen(body, l.validateUpdate)
	case "Query", "Scan":
		return decodeThen(body, func(in server.QueryInput) ([]action, error) { return l.validateQuery(op, in) })
	case "TransactWriteItems":
		return decodeThen(body, func(in server.TransactWriteItemsInput) ([]action, error) { return l.validateTransaction(in, body) })
	case "TransactGetItems":
		return decodeThen(body, l.validateTransactGet)
	case "BatchWriteItem":
		return decodeThen(body, l.validateBatchWrite)
	case "BatchGetItem":
		return decodeThen(body, l.validateBatchGet)
	}
	return nil, nil
}

// decodeThen decodes body as an In and validates it with check; a body
// that does not decode is refused as DynamoDB refuses it.
func decodeThen[In any](body []byte, check func(In) ([]action, error)) ([]action, error) {
	var in In
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("Start of structure or map found where not expected (%v)", err)
	}
	return check(in)
}

// exprsOf is the expressions of one request, with its raw values kept for
// checkValues.
func exprsOf(names map[string]string, values map[string]*server.AttributeValue, e map[string]*string) exprSet {
	set := newExprs(names, values, e)
	set.rawValues = values
	return set
}

func (l *Layer) validatePut(in server.PutItemInput) ([]action, error) {
	a := action{table: deref(in.TableName), item: in.Item,
		exprs: exprsOf(in.ExpressionAttributeNames, in.ExpressionAttributeValues, map[string]*string{"ConditionExpression": in.ConditionExpression})}
	return []action{a}, firstErr(checkValues(in.ExpressionAttributeValues), l.checkAction(a))
}

func (l *Layer) validateGet(in server.GetItemInput) ([]action, error) {
	a := action{table: deref(in.TableName), key: in.Key,
		exprs: exprsOf(in.ExpressionAttributeNames, nil, map[string]*string{"ProjectionExpression": in.ProjectionExpression})}
	return []action{a}, l.checkAction(a)
}

func (l *Layer) validateDelete(in server.DeleteItemInput) ([]action, error) {
	a := action{table: deref(in.TableName), key: in.Key,
		exprs: exprsOf(in.ExpressionAttributeNames, in.ExpressionAttributeValues, map[string]*string{"ConditionExpression": in.ConditionExpression})}
	return []action{a}, firstErr(checkValues(in.ExpressionAttributeValues), l.checkAction(a))
}

func (l *Layer) validateUpdate(in server.UpdateItemInput) ([]action, error) {
	a := action{table: deref(in.TableName), key: in.Key, update: in.UpdateExpression,
		exprs: exprsOf(in.ExpressionAttributeNames, in.ExpressionAttributeValues, map[string]*string{"ConditionExpression": in.ConditionExpression, "UpdateExpression": in.UpdateExpression})}
	if in.UpdateExpression == nil {
		return nil, fmt.Errorf("fluidbox test layer: UpdateItem without an UpdateExpression")
	}
	return []action{a}, firstErr(checkValues(in.ExpressionAttributeValues), l.checkAction(a))
}

// validateQuery checks a Query or a Scan (op): its index, limit,
// expressions and, for a Query, its key condition's values.
func (l *Layer) validateQuery(op string, in server.QueryInput) ([]action, error) {
	s, err := l.schemaOf(deref(in.TableName))
	if err != nil {
		return nil, nil // the server behind answers ResourceNotFoundException
	}
	if in.IndexName != nil {
		if _, ok := s.gsis[*in.IndexName]; !ok {
			return nil, fmt.Errorf("The table does not have the specified index: %s", *in.IndexName)
		}
		if in.ConsistentRead != nil && *in.ConsistentRead {
			return nil, fmt.Errorf("Consistent reads are not supported on global secondary indexes")
		}
	}
	if in.Limit != nil && *in.Limit <= 0 {
		return nil, fmt.Errorf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *in.Limit)
	}
	e := map[string]*string{"FilterExpression": in.FilterExpression, "ProjectionExpression": in.ProjectionExpression}
	if op == "Query" {
		if err := checkKeyCondition(in); err != nil {
			return nil, err
		}
		e["KeyConditionExpression"] = in.KeyConditionExpression
	}
	return nil, firstErr(checkValues(in.ExpressionAttributeValues), exprsOf(in.ExpressionAttributeNames, in.ExpressionAttributeValues, e).check())
}

// checkKeyCondition refuses a Query without a key condition, or whose
// key condition compares a key with an empty string.
func checkKeyCondition(in server.QueryInput) error {
	if in.KeyConditionExpression == nil {
		return fmt.Errorf("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	for _, v := range scan(*in.KeyConditionExpression).values {
		if av := in.ExpressionAttributeValues[v]; av != nil && av.S != nil && *av.S == "" {
			return fmt.Errorf("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Value: %s", v)
		}
	}
	return nil
}

func (l *Layer) validateTransactGet(in server.TransactGetItemsInput) ([]action, error) {
	if len(in.TransactItems) == 0 || len(in.TransactItems) > MaxTransactActions {
		return nil, fmt.Errorf("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", MaxTransactActions)
	}
	var acts []action
	for _, it := range in.TransactItems {
		if it.Get == nil {
			return nil, fmt.Errorf("TransactItems can only contain Get")
		}
		acts = append(acts, action{table: deref(it.Get.TableName), key: it.Get.Key,
			exprs: exprsOf(it.Get.ExpressionAttributeNames, nil, map[string]*string{"ProjectionExpression": it.Get.ProjectionExpression})})
	}
	return acts, l.checkAll(acts, "Transaction request cannot include multiple operations on one item")
}

func (l *Layer) validateBatchWrite(in server.BatchWriteItemInput) ([]action, error) {
	var acts []action
	for table, reqs := range in.RequestItems {
		for _, r := range reqs {
			switch {
			case r.PutRequest != nil:
				acts = append(acts, action{table: table, item: r.PutRequest.Item})
			case r.DeleteRequest != nil:
				acts = append(acts, action{table: table, key: r.DeleteRequest.Key})
			}
		}
	}
	if len(acts) == 0 || len(acts) > MaxBatchWrite {
		return nil, fmt.Errorf("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to %d, Member must have length greater than or equal to 1]", MaxBatchWrite)
	}
	return acts, l.checkAll(acts, "Provided list of item keys contains duplicates")
}

func (l *Layer) validateBatchGet(in server.BatchGetItemInput) ([]action, error) {
	var acts []action
	for table, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			acts = append(acts, action{table: table, key: k})
		}
	}
	if len(acts) == 0 || len(acts) > MaxBatchGet {
		return nil, fmt.Errorf("Too many items requested for the BatchGetItem call")
	}
	return acts, l.checkAll(acts, "Provided list of item keys contains duplicates")
}

func (l *Layer) validateTransaction(in server.TransactWriteItemsInput, body []byte) ([]action, error) {
	if len(in.TransactItems) == 0 || len(in.TransactItems) > MaxTransactActions {
		return nil, fmt.Errorf("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", MaxTransactActions)
	}
	var acts []action
	for _, it := range in.TransactItems {
		n := 0
		var a action
		if p := it.Put; p != nil {
			n++
			a = action{table: deref(p.TableName), item: p.Item,
				exprs: newExprs(p.ExpressionAttributeNames, p.ExpressionAttributeValues, map[string]*string{"ConditionExpression": p.ConditionExpression})}
			a.exprs.rawValues = p.ExpressionAttributeValues
		}
		if u := it.Update; u != nil {
			n++
			a = action{table: deref(u.TableName), key: u.Key, update: u.UpdateExpression,
				exprs: newExprs(u.ExpressionAttributeNames, u.ExpressionAttributeValues, map[string]*string{"ConditionExpression": u.ConditionExpression, "UpdateExpression": u.UpdateExpression})}
			a.exprs.rawValues = u.ExpressionAttributeValues
			if u.UpdateExpression == nil {
				return nil, fmt.Errorf("fluidbox test layer: a transaction Update without an UpdateExpression")
			}
		}
		if d := it.Delete; d != nil {
			n++
			a = action{table: deref(d.TableName), key: d.Key,
				exprs: newExprs(d.ExpressionAttributeNames, d.ExpressionAttributeValues, map[string]*string{"ConditionExpression": d.ConditionExpression})}
			a.exprs.rawValues = d.ExpressionAttributeValues
		}
		if c := it.ConditionCheck; c != nil {
			n++
			a = action{table: deref(c.TableName), key: c.Key,
				exprs: newExprs(c.ExpressionAttributeNames, c.ExpressionAttributeValues, map[string]*string{"ConditionExpression": c.ConditionExpression})}
			a.exprs.rawValues = c.ExpressionAttributeValues
			if c.ConditionExpression == nil {
				return nil, fmt.Errorf("fluidbox test layer: a ConditionCheck without a ConditionExpression")
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		if err := checkValues(a.exprs.rawValues); err != nil {
			return nil, err
		}
		acts = append(acts, a)
	}
	if err := l.checkAll(acts, "Transaction request cannot include multiple operations on one item"); err != nil {
		return nil, err
	}
	// The aggregate size counts the items and values the request carries.
	total := 0
	for _, a := range acts {
		total += itemSize(a.item) + itemSize(a.key)
		for _, v := range a.exprs.rawValues {
			total += valueSize(v)
		}
	}
	if total > MaxTransactBytes || len(body) > MaxTransactBytes+64<<10 {
		return nil, fmt.Errorf("Transaction request size exceeds the maximum allowed size of 4 MB")
	}
	return acts, nil
}

// checkAll checks each action and refuses two on one item.
func (l *Layer) checkAll(acts []action, dupMsg string) error {
	seen := map[string]bool{}
	for _, a := range acts {
		if err := l.checkAction(a); err != nil {
			return err
		}
		id := l.itemID(a)
		if seen[id] {
			return fmt.Errorf("%s", dupMsg)
		}
		seen[id] = true
	}
	return nil
}

// keyOf returns the action's partition and sort key strings.
func (l *Layer) keyOf(a action) (pk, sk string) {
	s, err := l.schemaOf(a.table)
	if err != nil {
		return "", ""
	}
	return keyStrings(s, a)
}

func keyStrings(s *schema, a action) (pk, sk string) {
	src := a.key
	if a.item != nil {
		src = a.item
	}
	str := func(attr string) string {
		if v := src[attr]; v != nil {
			switch {
			case v.S != nil:
				return *v.S
			case v.N != nil:
				return *v.N
			case v.B != nil:
				return string(v.B)
			}
		}
		return ""
	}
	return str(s.pk), str(s.sk)
}

func (l *Layer) itemID(a action) string {
	pk, sk := l.keyOf(a)
	return a.table + "\x00" + pk + "\x00" + sk
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
