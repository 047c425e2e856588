package ddbchaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/truora/minidyn/server"
)

// The IAM check: a request signed with an access key the layer was given a
// Policy for (Enforce) is authorized as AWS authorizes a role's request to
// DynamoDB, and refused with AccessDeniedException, before it reaches the
// table, when no statement allows it. The refusal is recorded with the
// validator's (Refused), so a test fails even if the code swallowed the
// error. Requests signed with any other key are not checked: they are a
// test's own setup.
//
// What is authorized, as on AWS: each request as its operation
// (dynamodb:GetItem, dynamodb:Query, dynamodb:BatchGetItem, ...) on the
// table's ARN, or on the index's for a Query or Scan of an index; a
// TransactWriteItems item by item as dynamodb:PutItem, UpdateItem,
// DeleteItem or ConditionCheckItem with dynamodb:EnclosingOperation
// TransactWriteItems (TransactGetItems likewise, as GetItem). The condition
// keys understood are dynamodb:LeadingKeys (the partition key values the
// request touches) under ForAllValues:StringLike and
// dynamodb:EnclosingOperation under ForAnyValue:StringEquals; a statement
// with any other condition cannot be expressed, so whoever translates a
// template's statements must refuse it rather than guess.

// Policy is what one role may do to DynamoDB: its Allow statements. A
// request is allowed when, for each action it is authorized as, some
// statement allows that action on its resource with its conditions holding.
type Policy struct {
	Statements []Statement
}

// Statement is one Allow statement of an identity policy.
type Statement struct {
	// Actions are IAM actions ("dynamodb:PutItem"), case-insensitive, with
	// IAM's * and ? wildcards.
	Actions []string
	// Resources are ARN patterns, with IAM's * and ? wildcards (TableARN
	// names a table of this layer).
	Resources []string
	// LeadingKeys, when not nil, is ForAllValues:StringLike on
	// dynamodb:LeadingKeys: every partition key value the request touches
	// matches one of these patterns.
	LeadingKeys []string
	// EnclosingOperations, when not nil, is ForAnyValue:StringEquals on
	// dynamodb:EnclosingOperation: the action is part of one of these
	// operations ("TransactWriteItems").
	EnclosingOperations []string
}

// Region and Account are those of the ARNs the layer authorizes against.
const (
	Region  = "us-east-1"
	Account = "000000000000"
)

// TableARN is the ARN of table as the IAM check sees it; an index's is
// TableARN(table) + "/index/" + name.
func TableARN(table string) string {
	return "arn:aws:dynamodb:" + Region + ":" + Account + ":table/" + table
}

// Enforce checks every later request signed with accessKeyID against p.
func (l *Layer) Enforce(accessKeyID string, p Policy) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.policies == nil {
		l.policies = map[string]Policy{}
	}
	l.policies[accessKeyID] = p
}

// authRequest is one authorization a request needs.
type authRequest struct {
	action    string // "dynamodb:PutItem"
	resource  string // an ARN
	enclosing string // "TransactWriteItems", or ""
	// leading are the partition key values touched; known is false when
	// they could not be told (a statement conditioned on them then does
	// not apply: unanalysable is not allowed).
	leading []string
	known   bool
}

// signingKey is the access key id of a SigV4 Authorization header.
var signingKey = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// authorize returns why the role r was signed as may not make this request
// ("" when it may, or when r's signer is not checked).
func (l *Layer) authorize(r *http.Request, op string, body []byte) string {
	m := signingKey.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return ""
	}
	l.mu.Lock()
	p, ok := l.policies[m[1]]
	l.mu.Unlock()
	if !ok {
		return ""
	}
	reqs, err := l.authRequests(op, body)
	if err != nil {
		return fmt.Sprintf("%s: %v", m[1], err)
	}
	for _, a := range reqs {
		if !p.allows(a) {
			what := a.action
			if a.enclosing != "" {
				what += " (in " + a.enclosing + ")"
			}
			return fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s (leading keys %q) because no identity-based policy allows the %s action",
				m[1], what, a.resource, a.leading, a.action)
		}
	}
	return ""
}

func (p Policy) allows(a authRequest) bool {
	for _, s := range p.Statements {
		if s.allows(a) {
			return true
		}
	}
	return false
}

func (s Statement) allows(a authRequest) bool {
	if !anyMatch(s.Actions, a.action, true) || !anyMatch(s.Resources, a.resource, false) {
		return false
	}
	if s.EnclosingOperations != nil && (a.enclosing == "" || !anyEqual(s.EnclosingOperations, a.enclosing)) {
		return false
	}
	if s.LeadingKeys != nil {
		if !a.known {
			return false
		}
		for _, k := range a.leading {
			if !anyMatch(s.LeadingKeys, k, false) {
				return false
			}
		}
	}
	return true
}

func anyEqual(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func anyMatch(patterns []string, v string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			p, v = strings.ToLower(p), strings.ToLower(v)
		}
		if wildcard(p, v) {
			return true
		}
	}
	return false
}

// wildcard matches v against an IAM pattern: * is any run of characters
// (slashes included), ? any one character.
func wildcard(p, v string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for i := len(v); i >= 0; i-- {
				if wildcard(p[1:], v[i:]) {
					return true
				}
			}
			return false
		case '?':
			if v == "" {
				return false
			}
		default:
			if v == "" || v[0] != p[0] {
				return false
			}
		}
		p, v = p[1:], v[1:]
	}
	return v == ""
}

// authRequests lists the authorizations op with body needs.
func (l *Layer) authRequests(op string, body []byte) ([]authRequest, error) {
	switch op {
	case "GetItem", "DeleteItem", "UpdateItem", "PutItem":
		var in struct {
			TableName string
			Key, Item map[string]*server.AttributeValue
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, err
		}
		key := in.Key
		if op == "PutItem" {
			key = in.Item
		}
		return []authRequest{l.authOne(op, in.TableName, key, "")}, nil
	case "Query", "Scan":
		return l.authQuery(op, body)
	case "BatchGetItem", "BatchWriteItem":
		return l.authBatch(op, body)
	case "TransactWriteItems", "TransactGetItems":
		return l.authTransaction(op, body)
	}
	// Control-plane and any other operation: itself, on the table it names.
	var in struct{ TableName string }
	_ = json.Unmarshal(body, &in)
	return []authRequest{{action: "dynamodb:" + op, resource: TableARN(in.TableName), known: true}}, nil
}

// authOne is the authorization of action on one item of table, inside
// the enclosing operation ("" for none).
func (l *Layer) authOne(action, table string, key map[string]*server.AttributeValue, enclosing string) authRequest {
	a := authRequest{action: "dynamodb:" + action, resource: TableARN(table), enclosing: enclosing}
	a.leading, a.known = l.leadingOf(table, key)
	return a
}

// authQuery is the authorization of a Query or Scan (op): on the table or
// the index, for the partition a Query names.
func (l *Layer) authQuery(op string, body []byte) ([]authRequest, error) {
	var in server.QueryInput
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	a := authRequest{action: "dynamodb:" + op, resource: TableARN(deref(in.TableName))}
	if in.IndexName != nil {
		a.resource += "/index/" + *in.IndexName
	}
	if op == "Scan" {
		a.known = true // a scan names no partition
	} else if in.KeyConditionExpression != nil {
		a.leading, a.known = l.queriedPartition(deref(in.TableName), in.IndexName, *in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	}
	return []authRequest{a}, nil
}

// authBatch is the authorization of a BatchGetItem or BatchWriteItem
// (op): one per table, for every partition its keys touch.
func (l *Layer) authBatch(op string, body []byte) ([]authRequest, error) {
	var in struct {
		RequestItems map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	var out []authRequest
	for table, raw := range in.RequestItems {
		keys, err := batchKeys(op, raw)
		if err != nil {
			return nil, err
		}
		a := authRequest{action: "dynamodb:" + op, resource: TableARN(table), known: true}
		for _, k := range keys {
			pk, ok := l.leadingOf(table, k)
			a.leading, a.known = append(a.leading, pk...), a.known && ok
		}
		out = append(out, a)
	}
	return out, nil
}

// batchKeys is the keys (or items) of one table's part of a batch.
func batchKeys(op string, raw json.RawMessage) ([]map[string]*server.AttributeValue, error) {
	if op == "BatchGetItem" {
		var ka server.KeysAndAttributes
		if err := json.Unmarshal(raw, &ka); err != nil {
			return nil, err
		}
		return ka.Keys, nil
	}
	var reqs []server.WriteRequest
	if err := json.Unmarshal(raw, &reqs); err != nil {
		return nil, err
	}
	var keys []map[string]*server.AttributeValue
	for _, r := range reqs {
		switch {
		case r.PutRequest != nil:
			keys = append(keys, r.PutRequest.Item)
		case r.DeleteRequest != nil:
			keys = append(keys, r.DeleteRequest.Key)
		}
	}
	return keys, nil
}

// authTransaction is the authorization of each item of a
// TransactWriteItems or TransactGetItems (op), enclosed in it.
func (l *Layer) authTransaction(op string, body []byte) ([]authRequest, error) {
	var in struct {
		TransactItems []struct {
			server.TransactWriteItem
			Get *server.Get
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	var out []authRequest
	for _, it := range in.TransactItems {
		switch {
		case op == "TransactGetItems":
			if it.Get != nil {
				out = append(out, l.authOne("GetItem", deref(it.Get.TableName), it.Get.Key, op))
			}
		case it.Put != nil:
			out = append(out, l.authOne("PutItem", deref(it.Put.TableName), it.Put.Item, op))
		case it.Update != nil:
			out = append(out, l.authOne("UpdateItem", deref(it.Update.TableName), it.Update.Key, op))
		case it.Delete != nil:
			out = append(out, l.authOne("DeleteItem", deref(it.Delete.TableName), it.Delete.Key, op))
		case it.ConditionCheck != nil:
			out = append(out, l.authOne("ConditionCheckItem", deref(it.ConditionCheck.TableName), it.ConditionCheck.Key, op))
		}
	}
	return out, nil
}

// leadingOf is the partition key value of key (or of an item).
func (l *Layer) leadingOf(table string, key map[string]*server.AttributeValue) ([]string, bool) {
	s, err := l.schemaOf(table)
	if err != nil {
		return nil, false
	}
	pk, _ := keyStrings(s, action{key: key})
	if pk == "" {
		return nil, false
	}
	return []string{pk}, true
}

// keyEquality finds "name = :value" terms of a key condition.
var keyEquality = regexp.MustCompile(`(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)`)

// queriedPartition is the partition a Query's key condition names: the
// value its hash key (of the table, or of the index queried) is equal to.
func (l *Layer) queriedPartition(table string, index *string, cond string, names map[string]string, values map[string]*server.AttributeValue) ([]string, bool) {
	s, err := l.schemaOf(table)
	if err != nil {
		return nil, false
	}
	hash := s.pk
	if index != nil {
		hash = s.gsis[*index][0]
	}
	for _, m := range keyEquality.FindAllStringSubmatch(cond, -1) {
		name := m[1]
		if strings.HasPrefix(name, "#") {
			name = names[name]
		}
		if v := values[m[2]]; name == hash && v != nil && v.S != nil {
			return []string{*v.S}, true
		}
	}
	return nil, false
}

func writeAccessDenied(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, "com.amazon.coral.service#AccessDeniedException", msg)
}
