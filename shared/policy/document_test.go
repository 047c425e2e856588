package policy

import (
	"encoding/json"
	"reflect"
	"testing"
)

// everyField is a document that sets every field of every type a Document
// holds, across its rules (requireEveryField checks, so a field added
// later fails the test until it is added here).
const everyField = `{"name":"every field","default_verdict":"deny",
 "approval":{"scope":"session","ttl_seconds":600},
 "autonomy":{"on_approval_rule":"deny"},
 "bash":{"opaque":"deny"},
 "rules":[
  {"id":"git","tool":"Bash","match":{"command_prefix":["git status"],"options":"any","agent_type":["Explore"]},"verdict":"allow"},
  {"id":"ask","tool":"Write","match":{"path":["/work/**"]},"verdict":"require_approval","scope":"session","ttl_seconds":300,"on_autonomous":"deny"},
  {"id":"jira","tool":"mcp__jira__*","match":{"input":{"/project":["OPS"]}},"verdict":"allow"}],
 "tests":[{"name":"read","tool_name":"Read","input":{"file_path":"a"},"expect":"deny","workspace":"/work","cwd":"/work"}]}`

// TestDocumentKeepsEveryField: Document() is what the control plane
// stores and every run compiles again (a dropped agent_type once made a
// subagent's allow rule allow every agent): stored as JSON and parsed
// again, it is the same document with the same digest.
func TestDocumentKeepsEveryField(t *testing.T) {
	p, _, err := Parse([]byte(everyField))
	if err != nil {
		t.Fatal(err)
	}
	doc := p.Document()
	requireEveryField(t, doc)
	stored, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := Parse(stored)
	if err != nil {
		t.Fatalf("the stored document does not parse: %v\n%s", err, stored)
	}
	if again.Digest() != p.Digest() || !reflect.DeepEqual(again.Document(), doc) {
		t.Errorf("stored and parsed again, the document changed:\nwas    %+v\nstored %s", p.doc, stored)
	}
}

// requireEveryField fails for each struct field, of every struct type
// reachable from v, that is zero wherever it occurs in v.
func requireEveryField(t *testing.T, v any) {
	t.Helper()
	set := map[string]bool{}
	fields := map[string]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				name := v.Type().Name() + "." + v.Type().Field(i).Name
				fields[name] = true
				if !v.Field(i).IsZero() {
					set[name] = true
				}
				walk(v.Field(i))
			}
		}
	}
	walk(reflect.ValueOf(v))
	for f := range fields {
		if !set[f] {
			t.Errorf("%s is zero in everyField: set it, so the round trip covers it", f)
		}
	}
}
