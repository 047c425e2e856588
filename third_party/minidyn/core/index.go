package core

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/truora/minidyn/types"
)

type indexType string

const (
	indexTypeGlobal indexType = "global"
	indexTypeLocal  indexType = "local"
)

type index struct {
	keySchema  keySchema
	sortedKeys []string
	sortedRefs [][2]string // used for searching
	typ        indexType
	projection *types.Projection
	Table      *Table
	refs       map[string]string
	createdAt  time.Time
	// parts holds, for each partition of the index (see partitionOf), its
	// references as [primary key, index key] pairs in search order (index
	// key, then primary key), and refParts the partition of each primary
	// key in it: a Query on the index reads one partition, not every
	// reference.
	parts    map[string][][2]string
	refParts map[string]string
}

func newIndex(t *Table, typ indexType, ks keySchema) *index {
	ks.Secondary = true

	return &index{
		keySchema:  ks,
		sortedKeys: []string{},
		typ:        typ,
		Table:      t,
		refs:       map[string]string{},
		parts:      map[string][][2]string{},
		refParts:   map[string]string{},
	}
}

func (i *index) Clear() {
	i.sortedKeys = []string{}
	i.refs = map[string]string{}
	i.parts = map[string][][2]string{}
	i.refParts = map[string]string{}
}

type indexSnapshot struct {
	sortedKeys []string
	refs       map[string]string
	parts      map[string][][2]string
	refParts   map[string]string
}

func (i *index) snapshot() indexSnapshot {
	keys := make([]string, len(i.sortedKeys))
	copy(keys, i.sortedKeys)

	refs := make(map[string]string, len(i.refs))
	maps.Copy(refs, i.refs)

	parts := make(map[string][][2]string, len(i.parts))
	for p, refs := range i.parts {
		parts[p] = slices.Clone(refs)
	}

	refParts := make(map[string]string, len(i.refParts))
	maps.Copy(refParts, i.refParts)

	return indexSnapshot{sortedKeys: keys, refs: refs, parts: parts, refParts: refParts}
}

func (i *index) restore(s indexSnapshot) {
	i.sortedKeys = s.sortedKeys
	i.refs = s.refs
	i.parts = s.parts
	i.refParts = s.refParts
}

// ProjectItem returns the attributes visible through this index's projection (ALL, KEYS_ONLY, INCLUDE).
// For ALL or unknown types, it returns a full shallow copy of the item.
func (i *index) ProjectItem(item map[string]*types.Item) map[string]*types.Item {
	if i == nil || i.projection == nil {
		return copyItem(item)
	}

	pt := ""
	if i.projection.ProjectionType != nil {
		pt = *i.projection.ProjectionType
	}

	switch pt {
	case "", "ALL":
		return copyItem(item)
	case "KEYS_ONLY":
		return i.projectKeysOnly(item)
	case "INCLUDE":
		return i.projectInclude(item)
	default:
		return copyItem(item)
	}
}

func (i *index) projectKeysOnly(item map[string]*types.Item) map[string]*types.Item {
	out := make(map[string]*types.Item)
	maps.Copy(out, i.Table.KeySchema.getKeyItem(item))
	maps.Copy(out, i.keySchema.getKeyItem(item))

	return out
}

func (i *index) projectInclude(item map[string]*types.Item) map[string]*types.Item {
	out := i.projectKeysOnly(item)

	for _, namePtr := range i.projection.NonKeyAttributes {
		if namePtr == nil {
			continue
		}

		name := *namePtr
		if v, ok := item[name]; ok {
			out[name] = v
		}
	}

	return out
}

// putData points the index at item, stored under the table key key. An
// item without the index's key attributes is not in the (sparse) index,
// so a reference it had before is removed.
func (i *index) putData(key string, item map[string]*types.Item) error {
	indexKey, err := i.keySchema.GetKey(i.Table.AttributesDef, item)
	if err != nil {
		return err
	}

	i.removeRef(key)

	if indexKey != "" {
		i.addRef(key, indexKey, partitionOf(i.keySchema, i.Table.AttributesDef, item))
	}

	return nil
}

// addRef and removeRef are the only writers of refs, sortedKeys and
// parts, so that the three always describe the same references:
// sortedKeys is exactly the sorted index keys of refs, which the
// full-index search walks in step with sortedRefs.
func (i *index) addRef(key, indexKey, part string) {
	if i.refs == nil {
		i.refs = map[string]string{}
	}

	if i.parts == nil {
		i.parts = map[string][][2]string{}
		i.refParts = map[string]string{}
	}

	i.refs[key] = indexKey
	pos, _ := slices.BinarySearch(i.sortedKeys, indexKey)
	i.sortedKeys = slices.Insert(i.sortedKeys, pos, indexKey)

	ref := [2]string{key, indexKey}
	refs := i.parts[part]
	pos, _ = slices.BinarySearchFunc(refs, ref, compareRefs)
	i.parts[part] = slices.Insert(refs, pos, ref)
	i.refParts[key] = part
}

func (i *index) removeRef(key string) {
	indexKey, ok := i.refs[key]
	if !ok {
		return
	}

	delete(i.refs, key)

	if pos, found := slices.BinarySearch(i.sortedKeys, indexKey); found {
		i.sortedKeys = slices.Delete(i.sortedKeys, pos, pos+1)
	}

	part, ok := i.refParts[key]
	if !ok {
		return
	}

	delete(i.refParts, key)

	refs := i.parts[part]
	if pos, found := slices.BinarySearchFunc(refs, [2]string{key, indexKey}, compareRefs); found {
		refs = slices.Delete(refs, pos, pos+1)
	}

	if len(refs) == 0 {
		delete(i.parts, part)
		return
	}

	i.parts[part] = refs
}

// startPosition returns the index key of an index Query's start: the one in
// its ExclusiveStartKey (which names the index's keys as well as the
// table's), else the one the start item has now. ok is false when neither
// exists.
func (i *index) startPosition(exclusiveStartKey map[string]*types.Item, startKey string) (string, bool) {
	if startKey == "" {
		return "", false
	}

	if ik, err := i.keySchema.GetKey(i.Table.AttributesDef, exclusiveStartKey); err == nil && ik != "" {
		return ik, true
	}

	ik, ok := i.refs[startKey]

	return ik, ok
}

// compareRefs orders [primary key, index key] references as a search
// walks them: by index key, then by primary key.
func compareRefs(x, y [2]string) int {
	if c := strings.Compare(x[1], y[1]); c != 0 {
		return c
	}

	return strings.Compare(x[0], y[0])
}

func (i *index) lessKey(x, y int) bool {
	if i.sortedRefs[x][1] < i.sortedRefs[y][1] {
		return true
	}

	if i.sortedRefs[x][1] > i.sortedRefs[y][1] {
		return false
	}

	return i.sortedRefs[x][0] < i.sortedRefs[y][0]
}

func (i *index) startSearch(scanForward bool) {
	i.sortedRefs = make([][2]string, len(i.refs))
	pos := 0

	for k, v := range i.refs {
		i.sortedRefs[pos] = [2]string{k, v}
		pos++
	}

	sort.Slice(i.sortedRefs, func(x, y int) bool {
		less := i.lessKey(x, y)
		if scanForward {
			return less
		}

		return !less
	})
}

func (i *index) getPrimaryKey(indexKey string) (string, bool) {
	if len(i.sortedRefs) > 0 {
		key := i.sortedRefs[0]
		pk, ik := key[0], key[1]

		i.sortedRefs = i.sortedRefs[1:len(i.sortedRefs)]

		if indexKey == ik {
			return pk, true
		}
	}

	return "", false
}

func (i *index) count() int64 {
	return int64(len(i.sortedKeys))
}
