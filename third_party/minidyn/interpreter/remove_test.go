package interpreter

import (
	"testing"

	"github.com/truora/minidyn/types"
)

// REMOVE takes top-level attributes out of the item, by name or by alias,
// alongside a SET in the same expression.
func TestLanguageUpdateRemovesTopLevelAttributes(t *testing.T) {
	s := func(v string) *types.Item { return &types.Item{S: &v} }
	item := map[string]*types.Item{"id": s("1"), "a": s("x"), "b": s("y"), "c": s("z")}

	err := (&Language{}).Update(UpdateInput{
		TableName:  "t",
		Expression: "SET c = :v REMOVE a, #b",
		Item:       item,
		Aliases:    map[string]string{"#b": "b"},
		Attributes: map[string]*types.Item{":v": s("new")},
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}

	if _, ok := item["a"]; ok {
		t.Errorf("REMOVE a left a in the item: %v", item)
	}

	if _, ok := item["b"]; ok {
		t.Errorf("REMOVE #b left b in the item: %v", item)
	}

	if len(item) != 2 || item["c"] == nil || *item["c"].S != "new" || item["id"] == nil {
		t.Errorf("item after the update = %v, want id and c = new", item)
	}
}
